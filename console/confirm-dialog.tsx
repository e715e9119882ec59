import type { ComponentChildren } from 'preact';
import { useEffect, useRef } from 'preact/hooks';

/** A step asked for, asked again before it is done (a restart, a deploy): open while `open`, its answer `onConfirm` or `onCancel`. */
export function ConfirmDialog({ open, titleId, title, confirm, onConfirm, onCancel, children }: {
  open: boolean;
  titleId: string;
  title: string;
  /** The confirming button's words, `Yes, restart`. */
  confirm: string;
  onConfirm: () => void;
  onCancel: () => void;
  /** What the step does. */
  children: ComponentChildren;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    if (open) dialog.current?.showModal();
    else dialog.current?.close();
  }, [open]);
  return (
    <dialog ref={dialog} aria-labelledby={titleId} onClose={onCancel}>
      <h2 id={titleId}>{title}</h2>
      <p>{children}</p>
      <div class="actions">
        <button type="button" class="confirm" onClick={onConfirm}>
          {confirm}
        </button>
        <button type="button" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </dialog>
  );
}
