// Entry point: wires the sign-in, the connection, the store, the dashboard, the search box, the
// notification bell, the splash and the status indicator.

import { Connection, pageServer, socketURL, streamURL } from './connection.js';
import { Store } from './store.js';
import { Dashboard } from './render.js';
import { Splash } from './splash.js';
import { TitleAndIcon } from './favicon.js';
import { SearchBox } from './search.js';
import { bindBell, notifier } from './notify.js';
import { SignIn } from './signin.js';
import { bindThemeToggle } from './theme.js';

const $ = (id) => document.getElementById(id);

const params = new URLSearchParams(location.search);
const watch = (params.get('watch') || '*').trim() || '*';
// A wall display: no chrome, big cards, the overall figure large (style.css).
if (params.get('view') === 'wall') document.body.dataset.view = 'wall';
bindThemeToggle($('theme'));

/** This page's address without `watch`: every task. */
function withoutWatch() {
  const rest = new URLSearchParams(location.search);
  rest.delete('watch');
  const query = rest.toString();
  return location.pathname + (query ? `?${query}` : '');
}

const server = pageServer(location);
const store = new Store();
const splash = new Splash($('splash'));
const titleAndIcon = new TitleAndIcon($('favicon'));
const summary = $('summary');
const searchCount = $('search-count');
const statusEl = $('status');
const statusText = statusEl.querySelector('.status-text');
const stale = $('stale');

if (watch !== '*') {
  const filter = $('filter');
  filter.textContent = `watching ${watch}`;
  filter.hidden = false;
  // Shown only while nothing is on the page: then nothing this filter matches is on the server.
  $('empty-title').replaceChildren(`No task matches “${watch}”. `,
    Object.assign(document.createElement('a'), { href: withoutWatch(), textContent: 'Show every task' }));
}
$('empty-hint').textContent = `curl -X POST -d '{"title":"Build","progress":0.42}' ${location.origin}/api/tasks/ci.build-42`;

const dashboard = new Dashboard({
  store,
  root: $('dashboard'),
  live: $('tasks'),
  recent: $('recent'),
  recentBox: $('recent-tasks'),
  note: $('note'),
  empty: $('empty'),
  overlay: $('modal-overlay'),
  modalList: $('modal-list'),
  announcer: $('announcer'),
  blockWhileModal: [$('topbar'), $('dashboard'), $('stale')],
  onSummary(s) {
    titleAndIcon.update(s);
    const parts = [];
    for (const state of ['running', 'paused', 'stalled', 'failed', 'cancelled', 'done']) {
      if (s.states[state]) parts.push(`${s.states[state]} ${state}`);
    }
    // On a wall the overall progress leads, large (style.css).
    if (document.body.dataset.view === 'wall' && s.pct != null) parts.unshift(`${s.pct} % overall`);
    const text = parts.join(' · ');
    if (summary.textContent !== text) summary.textContent = text;
    const count = s.filtered ? `${s.matching} of ${s.topLevel}` : '';
    if (searchCount.textContent !== count) searchCount.textContent = count;
  },
});

const search = new SearchBox($('search'), (q) => dashboard.setQuery(q));
dashboard.setQuery(search.value);

bindBell($('bell'));
const notifyIcon = new URL('logo.svg', location.href).href;
// Read once: location.origin costs a trip into the browser, and this runs for every event.
const origin = location.origin;
store.subscribe((c) => {
  if (c.type === 'task') {
    // Most events do not change a task's state, and only a change can be news.
    const prevState = c.prev && (c.prev.state || 'running');
    if (prevState === (c.task.state || 'running')) return;
    // States already there in the page's first snapshot are not news.
    notifier.consider(origin, c.task, prevState, store.everSynced,
      { icon: notifyIcon, onClick: () => dashboard.reveal(c.id) });
  } else if (c.type === 'remove') {
    notifier.forget(origin, c.id);
  }
});

function showStatus(state, text, transport) {
  statusEl.dataset.state = state;
  if (transport) statusEl.dataset.transport = transport;
  statusText.textContent = text;
  document.body.dataset.conn = state;
  // Once something was shown, say plainly when it is no longer live.
  stale.hidden = state === 'live' || !store.everSynced;
}

store.subscribe((c) => {
  if (c.type === 'synced') splash.finish();
});

const signIn = new SignIn({
  form: $('signin'),
  reason: $('signin-reason'),
  input: $('signin-token'),
  providers: $('signin-providers'),
  signOut: $('signout'),
  who: $('signed-in-as'),
  onShown() {
    splash.finish();
    showStatus('offline', 'Sign in to see tasks');
  },
});

let connection = null;
connection = new Connection({
  url: (since) => socketURL(server, watch, since),
  streamURL: (since) => streamURL(server, watch, since),
  since: () => store.since(),
  onEvent(ev) {
    // A socket without a token where reading needs one hears so at once (and waits for an `auth`
    // the page does not send: it signs in with the cookie instead).
    if (ev.type === 'error' && ev.error === 'unauthorized' && !store.everSynced) {
      connection.stop();
      signIn.show(ev.message);
      return;
    }
    // A filter the server refuses never gets a snapshot: say why, and how to clear it.
    if (ev.type === 'error' && ev.error === 'invalid_pattern' && !store.everSynced) {
      connection.stop();
      splash.finish();
      $('watch-problem').replaceChildren(`The server refused the filter “${watch}”: ${ev.message} `,
        Object.assign(document.createElement('a'), { href: withoutWatch(), textContent: 'Show every task' }));
      $('watch-problem').hidden = false;
      showStatus('offline', 'Filter refused');
      return;
    }
    store.handle(ev);
  },
  onStatus: showStatus,
  onLost: () => store.connectionLost(),
  onRefused: (code, reason) => signIn.show(code === 4440 ? `Your sign-in expired: ${reason}` : reason),
});
showStatus('reconnecting', 'Connecting…');
// A sign-in link's token is traded for the cookie, and the page learns what it may publish,
// before the socket opens: the first snapshot's cards already show the right buttons.
if (await signIn.start()) connection.start();
