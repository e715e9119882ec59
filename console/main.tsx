import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, plainWords } from './api.js';
import type { BotEvent } from './api.js';
import { Bot, EventList } from './bot.js';
import { Fleet } from './fleet.js';
import './style.css';
import { useEvents } from './use-events.js';

type Route = { page: 'fleet' } | { page: 'bot'; botId: string } | { page: 'events' };

function routeOf(hash: string): Route {
  const bot = /^#\/bots\/(.+)$/.exec(hash);
  if (bot) return { page: 'bot', botId: decodeURIComponent(bot[1]!) };
  if (hash === '#/events') return { page: 'events' };
  return { page: 'fleet' };
}

/** The admin token, typed once, for a session cookie (docs/api.md §12). */
function SignIn({ reason, onSignedIn }: { reason: string; onSignedIn: () => void }) {
  const [token, setToken] = useState('');
  const [failure, setFailure] = useState<string>();
  const submit = async (event: Event) => {
    event.preventDefault();
    try {
      await api('/api/session', { method: 'POST', body: { token } });
      setToken('');
      onSignedIn();
    } catch (err) {
      setFailure(plainWords(err));
    }
  };
  return (
    <form class="sign-in" onSubmit={submit} aria-labelledby="sign-in-title">
      <h1 id="sign-in-title">Sign in</h1>
      <p>{reason}</p>
      <label>
        Admin token <input type="password" autoComplete="current-password" value={token} required onInput={(e) => setToken(e.currentTarget.value)} />
      </label>
      <button type="submit">Sign in</button>
      {failure && (
        <p class="failure" role="alert">
          {failure}
        </p>
      )}
    </form>
  );
}

/** Every bot's events as they come, resumed where the connection broke. */
function Events() {
  const [events, setEvents] = useState<BotEvent[]>([]);
  useEvents('/api/events?after=0', (event) => setEvents((shown) => [event, ...shown].slice(0, 500)));
  return (
    <section aria-labelledby="events-page-title">
      <h1 id="events-page-title">Events</h1>
      <EventList events={events} showBot />
    </section>
  );
}

const THEMES = ['auto', 'light', 'dark'] as const;
type Theme = (typeof THEMES)[number];

function App() {
  const [route, setRoute] = useState(routeOf(location.hash));
  const [signIn, setSignIn] = useState<string>();
  const [theme, setTheme] = useState<Theme>((localStorage.getItem('theme') as Theme | null) ?? 'auto');
  const [generation, setGeneration] = useState(0);
  const [leaving, setLeaving] = useState(false);

  useEffect(() => {
    const follow = () => setRoute(routeOf(location.hash));
    addEventListener('hashchange', follow);
    return () => removeEventListener('hashchange', follow);
  }, []);
  useEffect(() => {
    document.documentElement.dataset.theme = theme;
    localStorage.setItem('theme', theme);
  }, [theme]);

  /** A 403 that says the caller is nobody: the page asks for the token. */
  const onForbidden = (err: unknown): boolean => {
    if (err instanceof ApiError && err.status === 403 && /forbidden/.test(err.message)) {
      setSignIn('This agent wants its admin token before it shows its bots.');
      return true;
    }
    return false;
  };
  // The pages leave first (their streams close, their pending reads are dropped), then the session ends: no
  // read of theirs goes out on a session already ended.
  const signOut = async () => {
    setLeaving(true);
    await new Promise((resolve) => setTimeout(resolve, 0));
    await api('/api/session', { method: 'DELETE' }).catch(() => undefined);
    setLeaving(false);
    setSignIn('Signed out.');
  };

  return (
    <>
      <a class="skip" href="#main">
        Skip to the content
      </a>
      <header class="top">
        <strong>bot-agent</strong>
        <nav aria-label="Pages">
          <a href="#/" aria-current={route.page === 'fleet' ? 'page' : undefined}>
            Bots
          </a>
          <a href="#/events" aria-current={route.page === 'events' ? 'page' : undefined}>
            Events
          </a>
        </nav>
        <label class="theme">
          Theme{' '}
          <select value={theme} onChange={(e) => setTheme(e.currentTarget.value as Theme)}>
            {THEMES.map((name) => (
              <option value={name}>{name}</option>
            ))}
          </select>
        </label>
        {/* Only once signed in: before, there is nothing to sign out of. */}
        {signIn === undefined && !leaving ? (
          <button type="button" onClick={signOut}>
            Sign out
          </button>
        ) : null}
      </header>
      <main id="main" key={generation}>
        {leaving ? (
          <p>Signing out…</p>
        ) : signIn !== undefined ? (
          <SignIn
            reason={signIn}
            onSignedIn={() => {
              setSignIn(undefined);
              setGeneration(generation + 1);
            }}
          />
        ) : route.page === 'bot' ? (
          <Bot botId={route.botId} onForbidden={onForbidden} />
        ) : route.page === 'events' ? (
          <Events />
        ) : (
          <Fleet onForbidden={onForbidden} />
        )}
      </main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
