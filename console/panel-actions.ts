import { useState } from 'preact/hooks';
import { plainWords } from './api.js';

/** What a panel's last action answered: the agent's words, and whether it was refused. */
export interface Answer {
  readonly ok: boolean;
  readonly text: string;
}

/**
 * A panel's actions, one at a time: `busy` while one is under way, its answer (the agent's message, else `said`, or
 * the refusal in plain words), and the panel loaded again after each.
 */
export function usePanelActions(load: () => Promise<void>) {
  const [busy, setBusy] = useState(false);
  const [answer, setAnswer] = useState<Answer>();
  const act = async (what: () => Promise<{ message?: string }>, said = '') => {
    setBusy(true);
    try {
      setAnswer({ ok: true, text: (await what()).message ?? said });
    } catch (err) {
      setAnswer({ ok: false, text: plainWords(err) });
    } finally {
      setBusy(false);
      void load();
    }
  };
  return { busy, answer, setAnswer, act };
}
