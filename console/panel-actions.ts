import { useState } from 'preact/hooks';
import { plainWords } from './api.js';

/** What a panel's last action answered: the agent's words, and whether it was refused. */
export interface Answer {
  readonly ok: boolean;
  readonly text: string;
}

/**
 * A panel's actions, one at a time: `busy` while one is under way, its answer (the agent's message, else `said`, or
 * the refusal in plain words; `pending` meanwhile; each after `prefix`), and the panel loaded again after each.
 */
export function usePanelActions(load: () => Promise<void> | void) {
  const [busy, setBusy] = useState(false);
  const [answer, setAnswer] = useState<Answer>();
  const act = async (what: () => Promise<{ message?: string }>, said = '', { pending, prefix = '' }: { pending?: string; prefix?: string } = {}) => {
    setBusy(true);
    if (pending !== undefined) setAnswer({ ok: true, text: `${prefix}${pending}` });
    try {
      setAnswer({ ok: true, text: `${prefix}${(await what()).message ?? said}` });
    } catch (err) {
      setAnswer({ ok: false, text: `${prefix}${plainWords(err)}` });
    } finally {
      setBusy(false);
      void load();
    }
  };
  return { busy, answer, setAnswer, act };
}
