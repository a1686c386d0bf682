// <ringcast-task server="wss://HOST" task="ci.build-42"></ringcast-task>
//
// An embeddable live view of one Ringcast task, for other sites:
//   <script type="module" src="https://HOST/ringcast-widget.js"></script>
// Built from the dashboard's own modules, imported from the server this script came from (the
// imports are relative, so they resolve against this script's URL; the server sends every file
// of Public/ with `Access-Control-Allow-Origin: *`, which a module script from another origin
// needs). So the card says what the dashboard's card says (js/face.js: ring, title, badge,
// detail, units · rate · ETA), events are applied by the dashboard's store (js/store.js), and
// the WebSocket to `${server}/ws?watch=${task}` is the dashboard's (js/connection.js: capped
// full-jitter back-off, resume with `since`, a watchdog). It renders into its own shadow DOM with
// styles from a constructable stylesheet (allowed under a strict CSP). The host site must be
// listed in the server's `allowedOrigins`.
//
// A server that does not let everyone read the task wants a token: `token="…"` (a reader's, or a
// signed one a backend minted for this page) is sent in an `auth` message once the socket opens,
// never in its URL. A page of the server's own site has the dashboard's sign-in cookie instead.
//
// With the `notify` attribute the card gets a bell: once the person allows it, the task finishing,
// failing or stalling shows a system notification while the page is not in front. That code
// (js/notify.js, shared with the dashboard) is loaded from the server only then.

import { Connection, socketURL, streamURL } from './js/connection.js';
import { Store, isShown, stateOf } from './js/store.js';
import { createFace, faceText, writeFace } from './js/face.js';
import { setRing } from './js/ring.js';
import { Announcer, finishNews } from './js/announce.js';
import { HideTimers } from './js/hide-timers.js';
import { el, safeLink, write } from './js/dom.js';

const SVG_NS = 'http://www.w3.org/2000/svg';
// The ring while there is no task to show: an empty track.
const NO_TASK = { mode: 'static', fraction: 0, valuenow: null, valuetext: '', label: '', text: '', unit: '' };

const CSS = `
:host {
  --rc-accent: #6d5dfc; --rc-ok: #16a34a; --rc-bad: #dc2626; --rc-warn: #d97706; --rc-idle: #8391a7; --rc-stall: #c026d3;
  --rc-bg: #ffffff; --rc-text: #0f172a; --rc-muted: #5b6b82; --rc-border: #e3e7f0; --rc-track: rgb(100 116 139 / .16);
  --rc-ring-size: 56px;
  --rc-ok-text: #15803d; --rc-bad-text: #b91c1c; --rc-warn-text: #92400e; --rc-idle-text: #4b5563; --rc-stall-text: #a21caf;
  display: inline-block; min-width: 240px; max-width: 100%;
  font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "DejaVu Sans", sans-serif;
  color: var(--rc-text);
}
@media (prefers-color-scheme: dark) {
  :host(:not([theme="light"])) { --rc-bg: #131a2e; --rc-text: #e5e9f2; --rc-muted: #9aa6bc; --rc-border: #243049; --rc-accent: #8b7dff;
          --rc-ok: #22c55e; --rc-bad: #f87171; --rc-track: rgb(148 163 184 / .16); --rc-link: #b3a9ff;
          --rc-ok-text: #4ade80; --rc-bad-text: #fca5a5; --rc-warn-text: #fcd34d; --rc-idle-text: #cbd5e1; --rc-stall-text: #f0abfc; }
}
/* theme="dark" or "light" follows the host page's theme rather than the system's */
:host([theme="dark"]) { --rc-bg: #131a2e; --rc-text: #e5e9f2; --rc-muted: #9aa6bc; --rc-border: #243049; --rc-accent: #8b7dff;
          --rc-ok: #22c55e; --rc-bad: #f87171; --rc-track: rgb(148 163 184 / .16); --rc-link: #b3a9ff;
          --rc-ok-text: #4ade80; --rc-bad-text: #fca5a5; --rc-warn-text: #fcd34d; --rc-idle-text: #cbd5e1; --rc-stall-text: #f0abfc; }
.link { color: var(--rc-link, #4534d6); font-size: .85em; overflow-wrap: anywhere; }
:host([hidden]), [hidden] { display: none !important; }
.card { --c: var(--rc-accent); position: relative; display: flex; align-items: center; gap: 12px;
  padding: 12px 14px; border-radius: 14px; background: var(--rc-bg); border: 1px solid var(--rc-border);
  box-shadow: 0 1px 2px rgb(15 23 42 / .05), 0 4px 14px rgb(15 23 42 / .06);
  animation: in .3s ease-out both; transition: opacity .3s, filter .3s; }
.card[data-state="done"] { --c: var(--rc-ok); --ct: var(--rc-ok-text); }
.card[data-state="failed"] { --c: var(--rc-bad); --ct: var(--rc-bad-text); }
.card[data-state="paused"] { --c: var(--rc-warn); --ct: var(--rc-warn-text); }
.card[data-state="cancelled"] { --c: var(--rc-idle); --ct: var(--rc-idle-text); }
.card[data-state="stalled"] { --c: var(--rc-stall); --ct: var(--rc-stall-text); }
.card[data-state="none"] :is(.head, .detail, .meta) { display: none; }
.card[data-conn="reconnecting"], .card[data-conn="offline"] { opacity: .6; filter: grayscale(.7); }
.ring { position: relative; flex: none; width: var(--rc-ring-size); height: var(--rc-ring-size); }
svg { display: block; width: 100%; height: 100%; }
circle { fill: none; stroke-width: 10; }
.track { stroke: var(--rc-track); }
.arc { stroke: var(--c); stroke-linecap: round; stroke-dasharray: 100 100; stroke-dashoffset: 100;
  transition: stroke-dashoffset .45s cubic-bezier(.2, .8, .2, 1), stroke .3s; }
.ring.timer .arc, .ring.quick .arc, .ring.static .arc { transition: stroke .3s; }
.ring.spinner svg { animation: spin .9s linear infinite; }
.ring.spinner .arc { stroke-dasharray: 28 100; stroke-dashoffset: 0; transition: none; }
.value { position: absolute; inset: 0; display: flex; align-items: center; justify-content: center;
  font-weight: 700; font-size: calc(var(--rc-ring-size) * .26); font-variant-numeric: tabular-nums; line-height: 1; }
.unit { font-size: .55em; opacity: .65; padding-top: .25em; }
.num.icon { font-size: 1.4em; color: var(--c); }
.info { min-width: 0; flex: 1; }
.head { display: flex; align-items: center; justify-content: space-between; gap: 8px; }
.title { font-weight: 650; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.detail, .meta { margin: 0; color: var(--rc-muted); font-size: .85em; overflow-wrap: anywhere; }
.meta { display: flex; flex-wrap: wrap; gap: 0 10px; font-variant-numeric: tabular-nums; }
.meta span:empty { display: none; }
.meta .usual.slow { color: var(--rc-warn-text); font-weight: 600; }
.badge { flex: none; font-size: .68em; font-weight: 700; letter-spacing: .05em; text-transform: uppercase; color: var(--ct, var(--c)); }
.card[data-request] .badge { color: var(--rc-warn-text); }
.dot { position: absolute; top: 8px; right: 8px; width: 7px; height: 7px; border-radius: 50%; background: var(--rc-warn); }
.dot[data-state="live"] { background: var(--rc-ok); }
.dot[data-state="offline"] { background: var(--rc-bad); }
.placeholder { color: var(--rc-muted); font-size: .9em; }
.bell { flex: none; align-self: flex-start; display: inline-grid; place-items: center; width: 26px; height: 26px;
  margin: -4px 6px 0 0; padding: 0; border-radius: 50%; border: 1px solid var(--rc-border); background: transparent;
  color: var(--rc-muted); cursor: pointer; }
.bell svg { width: 15px; height: 15px; fill: none; stroke: currentColor; stroke-width: 1.8; stroke-linecap: round; stroke-linejoin: round; }
.bell:focus-visible { outline: 2px solid var(--rc-accent); outline-offset: 2px; }
.bell .slash { display: none; }
.bell[data-state="on"] { color: var(--rc-accent); }
.bell[data-state="on"] .body { fill: color-mix(in srgb, var(--rc-accent) 22%, transparent); }
.bell[data-state="blocked"] { cursor: not-allowed; opacity: .7; }
.bell[data-state="blocked"] .slash { display: inline; }
.sr { position: absolute; width: 1px; height: 1px; margin: -1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
@keyframes spin { to { transform: rotate(360deg); } }
@keyframes in { from { opacity: 0; transform: scale(.96); } }
@keyframes pulse { 50% { opacity: .45; } }
@media (prefers-reduced-motion: reduce) {
  .card { animation: fade .2s ease-out both; }
  .arc { transition: none; }
  .ring.spinner svg { animation: pulse 1.6s ease-in-out infinite; }
}
@keyframes fade { from { opacity: 0; } }
`;

let sheet = null;
function styles() {
  if (!sheet) {
    sheet = new CSSStyleSheet();
    sheet.replaceSync(CSS);
  }
  return sheet;
}

function svg(tag, className, parent) {
  const e = document.createElementNS(SVG_NS, tag);
  if (className) e.setAttribute('class', className);
  if (parent) parent.append(e);
  return e;
}

/** Whether `server` is a ws:// or wss:// address a WebSocket can be opened to. */
function socketAddress(server) {
  try {
    const url = new URL(server);
    return url.protocol === 'ws:' || url.protocol === 'wss:';
  } catch {
    return false;
  }
}

class RingcastTask extends HTMLElement {
  static get observedAttributes() { return ['server', 'task', 'notify', 'token', 'theme']; }

  constructor() {
    super();
    const root = this.attachShadow({ mode: 'open' });
    root.adoptedStyleSheets = [styles()];
    this.card = el('div', 'card');
    this.card.setAttribute('part', 'card');
    this.face = createFace(this.card, { titleTag: 'div' });
    this.card.dataset.state = this.face.last.state = 'none';
    this.placeholderEl = el('div', 'placeholder');
    // The publisher's link (a CI run, a pull request), when the task has one.
    this.link = el('a', 'link');
    this.link.rel = 'noopener noreferrer';
    this.link.target = '_blank';
    this.link.hidden = true;
    this.face.info.append(this.placeholderEl, this.link);
    this.dot = el('span', 'dot');
    this.dot.setAttribute('role', 'status');
    this.card.append(this.face.ring.el, this.face.info, this.dot);
    const live = el('span', 'sr');
    live.setAttribute('role', 'status');
    live.setAttribute('aria-live', 'polite');
    root.append(this.card, live);
    this.announcer = new Announcer(live);
    this.hideTimers = new HideTimers(() => this.schedule());
    this.store = null;
    this.connection = null;
    this.taskId = '';
    this.problem = ''; // what is wrong with the attributes
    this.statusText = 'Connecting…';
    this.frame = 0;
    this.etaTimer = 0;
    this.last = {};
  }

  connectedCallback() {
    this.started = true;
    this.setupNotify();
    this.open();
  }

  disconnectedCallback() {
    this.started = false;
    this.shut();
  }

  attributeChangedCallback(name, old, value) {
    // Before connectedCallback (upgrade, parsing) the attributes are just read there.
    if (old === value || !this.started) return;
    if (name === 'notify') {
      this.setupNotify();
      return;
    }
    if (name === 'theme') return; // the stylesheet follows it
    // Another task or server: what the store holds is about something else.
    this.shut();
    this.store = null;
    this.open();
  }

  /** Watches the task the attributes name, on the server they name. */
  open() {
    const server = (this.getAttribute('server') || '').trim();
    this.taskId = this.getAttribute('task') || '';
    this.problem = '';
    if (!server || !this.taskId) this.problem = 'Set the server and task attributes';
    else if (!socketAddress(server)) this.problem = `server="${server}" is not a ws:// or wss:// address`;
    if (this.problem) {
      console.warn(`ringcast-task: ${this.problem}`);
      this.setConn('offline', this.problem);
      return;
    }
    if (!this.store) {
      this.store = new Store();
      this.store.subscribe((c) => this.changed(c));
    }
    const store = this.store;
    const id = this.taskId;
    const token = (this.getAttribute('token') || '').trim();
    this.connection = new Connection({
      url: (since) => socketURL(server, id, since),
      since: () => store.since(),
      onEvent: (ev) => {
        // Without a token of its own the socket is told it needs one; with one, its `auth` follows.
        if (ev.type === 'error' && ev.error === 'unauthorized' && token && !store.everSynced) return;
        store.handle(ev);
      },
      onStatus: (state, text, transport) => this.setConn(state, text, transport),
      onLost: () => store.connectionLost(),
      // A stream cannot send the `auth` a token goes in: a widget with a token stays on the WebSocket.
      streamURL: token ? null : (since) => streamURL(server, id, since),
      onRefused: (_code, reason) => this.setConn('offline', `Not allowed to read ${id}${reason ? `: ${reason}` : ''}`),
      greeting: () => (token ? JSON.stringify({ type: 'auth', token }) : null),
    });
    this.setConn('reconnecting', 'Connecting…');
    this.connection.start();
  }

  shut() {
    if (this.connection) this.connection.close();
    this.connection = null;
    this.hideTimers.clear();
    clearTimeout(this.etaTimer);
    this.etaTimer = 0;
    cancelAnimationFrame(this.frame);
    this.frame = 0;
  }

  /** A change in the store (store.js). */
  changed(c) {
    if (c.id === this.taskId) {
      if (c.type === 'task') {
        this.notify(c);
        this.announcer.add(finishNews(c));
      } else if (c.type === 'remove' && this.notifier) {
        this.notifier.forget(this.getAttribute('server') || '', c.id);
      }
    }
    this.schedule();
  }

  /** With `notify`: a bell in the card, and js/notify.js loaded from the server the script came from. */
  setupNotify() {
    const on = this.hasAttribute('notify');
    if (this.bell) this.bell.hidden = !on;
    if (!on || this.notifyLoading) return;
    this.notifyLoading = import('./js/notify.js').then((m) => {
      this.notifier = m.notifier;
      const bell = el('button', 'bell');
      bell.type = 'button';
      bell.setAttribute('aria-label', 'Notify me');
      bell.setAttribute('part', 'bell');
      const icon = svg('svg', null, bell);
      icon.setAttribute('viewBox', '0 0 24 24');
      icon.setAttribute('aria-hidden', 'true');
      for (const [cls, d] of [['body', 'M6 9a6 6 0 0 1 12 0c0 6.2 2.6 8 2.6 8H3.4S6 15.2 6 9'],
        ['clapper', 'M10.2 20.5a2 2 0 0 0 3.6 0'], ['slash', 'M3.5 3.5l17 17']]) {
        svg('path', cls, icon).setAttribute('d', d);
      }
      this.card.insertBefore(bell, this.dot);
      this.bell = bell;
      m.bindBell(bell);
      bell.hidden = !this.hasAttribute('notify') || !m.notifier.supported;
    }, (err) => console.warn('ringcast-task: cannot load notifications', err));
  }

  /** Hands a change of the task to the notifier (when `notify` is set and loaded). */
  notify(c) {
    if (!this.notifier || !this.hasAttribute('notify')) return;
    // States already there in the first snapshot are not news.
    // No icon: the host page's CSP decides which images may load, and ours may not be among them.
    this.notifier.consider(this.getAttribute('server') || '', c.task, c.prev && stateOf(c.prev), this.store.everSynced);
  }

  setConn(state, text, transport) {
    this.statusText = text;
    if (transport) this.dot.dataset.transport = transport;
    this.dot.dataset.state = state;
    this.dot.setAttribute('aria-label', text);
    this.dot.title = text;
    // Dim what is shown once it is no longer live; nothing is shown before the first snapshot.
    this.card.dataset.conn = state === 'live' || this.store?.everSynced ? state : 'connecting';
    this.schedule();
  }

  schedule() {
    if (!this.frame && this.started) this.frame = requestAnimationFrame(() => this.render());
  }

  placeholder(text) {
    write(this.last, 'placeholder', text, (v) => {
      this.placeholderEl.textContent = v;
      this.placeholderEl.hidden = !v;
    });
  }

  render() {
    this.frame = 0;
    const store = this.store;
    const task = store && !this.problem ? store.tasks.get(this.taskId) : undefined;
    const now = store ? store.serverNow() : Date.now();
    this.announcer.flush();
    this.hideTimers.watch(this.taskId, task, now);
    write(this.last, 'hidden', !!task && !isShown(task, now), (v) => { this.hidden = v; });
    if (!task) {
      this.placeholder(this.problem || (store?.everSynced ? `Unknown task ${this.taskId}: nothing published yet` : this.statusText));
      write(this.face.last, 'state', 'none', (v) => { this.card.dataset.state = v; });
      setRing(this.face.ring, NO_TASK);
      return;
    }
    this.placeholder('');
    const text = faceText(task, now);
    writeFace(this.face, text);
    write(this.last, 'url', task.url || '', (v) => {
      const link = safeLink(v);
      this.link.hidden = !link;
      if (link) {
        this.link.href = link.href;
        this.link.textContent = link.text;
      } else {
        this.link.removeAttribute('href');
      }
    });
    if (text.ring.active) {
      this.schedule();
    } else if ((text.etaCountsDown || text.state === 'running' || text.clock) && !this.etaTimer) {
      // A countdown ETA, the elapsed clock or a quiet publisher's silence: redrawn every second.
      this.etaTimer = setTimeout(() => {
        this.etaTimer = 0;
        this.schedule();
      }, 1000);
    }
  }
}

if (!customElements.get('ringcast-task')) customElements.define('ringcast-task', RingcastTask);

export { RingcastTask };
