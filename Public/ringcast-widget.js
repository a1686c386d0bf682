// <ringcast-task server="wss://HOST" task="ci.build-42"></ringcast-task>
//
// An embeddable live view of one Ringcast task, for other sites:
//   <script type="module" src="https://HOST/ringcast-widget.js"></script>
// Self-contained on purpose (one request, no imports): its own shadow DOM, styles from a
// constructable stylesheet (allowed under a strict CSP), its own reconnecting WebSocket to
// `${server}/ws?watch=${task}` with capped full-jitter back-off, resume (`since`) and a watchdog.
// The host site must be listed in the server's `allowedOrigins`.
//
// With the `notify` attribute the card gets a bell: once the person allows it, the task finishing,
// failing or stalling shows a system notification while the page is not in front. That code
// (js/notify.js, shared with the dashboard) is loaded from the server only then.

const SVG_NS = 'http://www.w3.org/2000/svg';
const FATAL_CLOSE = new Set([1002, 1003, 1007, 1008]);
const BASE_DELAY_MS = 500;
const MAX_DELAY_MS = 15000;

const CSS = `
:host {
  --rc-accent: #6d5dfc; --rc-ok: #16a34a; --rc-bad: #dc2626; --rc-warn: #d97706; --rc-idle: #8391a7; --rc-stall: #c026d3;
  --rc-bg: #ffffff; --rc-text: #0f172a; --rc-muted: #5b6b82; --rc-border: #e3e7f0; --rc-track: rgb(100 116 139 / .16);
  --rc-ring-size: 56px;
  display: inline-block; min-width: 240px; max-width: 100%;
  font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "DejaVu Sans", sans-serif;
  color: var(--rc-text);
}
@media (prefers-color-scheme: dark) {
  :host { --rc-bg: #131a2e; --rc-text: #e5e9f2; --rc-muted: #9aa6bc; --rc-border: #243049; --rc-accent: #8b7dff;
          --rc-ok: #22c55e; --rc-bad: #f87171; --rc-track: rgb(148 163 184 / .16); }
}
:host([hidden]), [hidden] { display: none !important; }
.card { --c: var(--rc-accent); position: relative; display: flex; align-items: center; gap: 12px;
  padding: 12px 14px; border-radius: 14px; background: var(--rc-bg); border: 1px solid var(--rc-border);
  box-shadow: 0 1px 2px rgb(15 23 42 / .05), 0 4px 14px rgb(15 23 42 / .06);
  animation: in .3s ease-out both; transition: opacity .3s, filter .3s; }
.card[data-state="done"] { --c: var(--rc-ok); }
.card[data-state="failed"] { --c: var(--rc-bad); }
.card[data-state="paused"] { --c: var(--rc-warn); }
.card[data-state="cancelled"] { --c: var(--rc-idle); }
.card[data-state="stalled"] { --c: var(--rc-stall); }
.card[data-conn="reconnecting"], .card[data-conn="offline"] { opacity: .6; filter: grayscale(.7); }
.ring { position: relative; flex: none; width: var(--rc-ring-size); height: var(--rc-ring-size); }
svg { display: block; width: 100%; height: 100%; }
circle { fill: none; stroke-width: 10; }
.track { stroke: var(--rc-track); }
.arc { stroke: var(--c); stroke-linecap: round; stroke-dasharray: 100 100; stroke-dashoffset: 100;
  transition: stroke-dashoffset .45s cubic-bezier(.2, .8, .2, 1), stroke .3s; }
.ring.timer .arc, .ring.static .arc { transition: stroke .3s; }
.ring.spinner svg { animation: spin .9s linear infinite; }
.ring.spinner .arc { stroke-dasharray: 28 100; stroke-dashoffset: 0; transition: none; }
.value { position: absolute; inset: 0; display: flex; align-items: center; justify-content: center;
  font-weight: 700; font-size: calc(var(--rc-ring-size) * .26); font-variant-numeric: tabular-nums; line-height: 1; }
.unit { font-size: .55em; opacity: .65; padding-top: .25em; }
.num.icon { font-size: 1.4em; color: var(--c); }
.info { min-width: 0; flex: 1; }
.title { font-weight: 650; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.detail, .meta { color: var(--rc-muted); font-size: .85em; overflow-wrap: anywhere; }
.badge { font-size: .68em; font-weight: 700; letter-spacing: .05em; text-transform: uppercase; color: var(--c); }
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

function node(tag, className, parent) {
  const e = tag === 'svg' || tag === 'circle' || tag === 'path' ? document.createElementNS(SVG_NS, tag) : document.createElement(tag);
  if (className) e.setAttribute('class', className);
  if (parent) parent.append(e);
  return e;
}

const LABEL = { running: 'Running', paused: 'Paused', done: 'Done', failed: 'Failed', cancelled: 'Cancelled', stalled: 'Stalled' };
const ICON = { done: '✓', failed: '✕', cancelled: '–', paused: '❚❚', stalled: '?' };

function timerRemaining(t, now) {
  const tm = t.timer || {};
  const total = tm.seconds ?? t.total ?? 0;
  if (t.state === 'done') return 0;
  let rem;
  if (tm.endsAt != null) {
    const at = tm.pausedAt ?? (t.state === 'running' ? now : t.updatedAt ?? now);
    rem = (tm.endsAt - at) / 1000;
    if (tm.remaining != null) rem = Math.min(tm.remaining, Math.max(tm.remaining - (tm.interval || 1), rem));
  } else rem = tm.remaining ?? total - (tm.elapsed ?? 0);
  return Math.min(Math.max(rem, 0), total || Infinity);
}

/** What the ring shows: same rules as the dashboard's ring.js. */
function view(t, now) {
  const state = t.state || 'running';
  if (t.timer) {
    const total = t.timer.seconds ?? t.total ?? 0;
    const rem = timerRemaining(t, now);
    const whole = Math.max(0, Math.ceil(rem - 1e-6));
    const f = total > 0 ? 1 - rem / total : 1;
    return { mode: 'timer', f, now: Math.round(Math.min(1, Math.max(0, f)) * 100), text: String(whole), unit: 's',
      valuetext: `${whole} second${whole === 1 ? '' : 's'} left`, active: state === 'running' && t.timer.pausedAt == null && rem > 0 };
  }
  if (t.progress == null) {
    if (state === 'running') return { mode: 'spinner', f: 0, now: null, text: '', unit: '', valuetext: 'In progress' };
    return { mode: 'static', f: state === 'done' ? 1 : 0, now: state === 'done' ? 100 : null, text: ICON[state] || '', unit: '', valuetext: LABEL[state] || state };
  }
  const p = Math.min(1, Math.max(0, Number(t.progress) || 0));
  const pct = Math.round(p * 100);
  return { mode: 'determinate', f: p, now: pct, text: state === 'done' ? '✓' : String(pct), unit: state === 'done' ? '' : '%',
    valuetext: `${pct} percent${state !== 'running' ? `, ${(LABEL[state] || state).toLowerCase()}` : ''}` };
}

function fmtDuration(s) {
  if (!Number.isFinite(s) || s < 0) return '';
  s = Math.round(s);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  return m < 60 ? `${m} min ${s % 60} s` : `${Math.floor(m / 60)} h ${m % 60} min`;
}

class RingcastTask extends HTMLElement {
  static get observedAttributes() { return ['server', 'task', 'notify']; }

  constructor() {
    super();
    const root = this.attachShadow({ mode: 'open' });
    root.adoptedStyleSheets = [styles()];
    this.ui = this.build(root);
    this.task = null;
    this.epoch = null;
    this.seq = 0;
    this.offset = 0;
    this.heartbeatMs = 15000;
    this.ws = null;
    this.attempts = 0;
    this.retryTimer = 0;
    this.watchdog = 0;
    this.frame = 0;
    this.last = {};
    this.onVisible = () => {
      if (!document.hidden && this.isConnected && (!this.ws || this.ws.readyState !== WebSocket.OPEN)) {
        this.attempts = 0;
        this.connect();
      }
    };
  }

  build(root) {
    const card = node('div', 'card', root);
    card.setAttribute('part', 'card');
    const ring = node('div', 'ring', card);
    ring.setAttribute('role', 'progressbar');
    ring.setAttribute('aria-valuemin', '0');
    ring.setAttribute('aria-valuemax', '100');
    const svg = node('svg', null, ring);
    svg.setAttribute('viewBox', '0 0 100 100');
    svg.setAttribute('aria-hidden', 'true');
    for (const cls of ['track', 'arc']) {
      const c = node('circle', cls, svg);
      c.setAttribute('cx', '50');
      c.setAttribute('cy', '50');
      c.setAttribute('r', '42');
    }
    const arc = svg.lastChild;
    arc.setAttribute('pathLength', '100');
    arc.setAttribute('transform', 'rotate(-90 50 50)');
    const value = node('span', 'value', ring);
    value.setAttribute('aria-hidden', 'true');
    const num = node('span', 'num', value);
    const unit = node('span', 'unit', value);
    const info = node('div', 'info', card);
    const title = node('div', 'title', info);
    const detail = node('div', 'detail', info);
    const meta = node('div', 'meta', info);
    const badge = node('div', 'badge', info);
    const placeholder = node('div', 'placeholder', info);
    const dot = node('span', 'dot', card);
    dot.setAttribute('role', 'status');
    const live = node('span', null, root);
    live.setAttribute('role', 'status');
    live.setAttribute('aria-live', 'polite');
    live.className = 'sr';
    return { card, ring, arc, num, unit, title, detail, meta, badge, placeholder, dot, live };
  }

  connectedCallback() {
    this.started = true;
    this.setupNotify();
    document.addEventListener('visibilitychange', this.onVisible);
    this.setConn('reconnecting', 'Connecting…');
    this.placeholder('Connecting…');
    this.connect();
  }

  disconnectedCallback() {
    this.started = false;
    document.removeEventListener('visibilitychange', this.onVisible);
    clearTimeout(this.retryTimer);
    clearTimeout(this.watchdog);
    clearTimeout(this.hideTimer);
    this.last.hideAt = undefined;
    cancelAnimationFrame(this.frame);
    this.frame = 0;
    this.closeSocket(1000);
  }

  attributeChangedCallback(name, old, value) {
    // Before connectedCallback (upgrade, parsing) the attributes are just read there.
    if (old === value || !this.started) return;
    if (name === 'notify') {
      this.setupNotify();
      return;
    }
    if (name === 'task') {
      this.task = null;
      this.epoch = null;
      this.seq = 0;
    }
    this.attempts = 0;
    this.connect();
  }

  /** With `notify`: a bell in the card, and js/notify.js loaded from the server the script came from. */
  setupNotify() {
    const on = this.hasAttribute('notify');
    if (this.ui.bell) this.ui.bell.hidden = !on;
    if (!on || this.notifyLoading) return;
    this.notifyLoading = import(new URL('js/notify.js', import.meta.url).href).then((m) => {
      this.notifier = m.notifier;
      const bell = node('button', 'bell');
      bell.type = 'button';
      bell.setAttribute('aria-label', 'Notify me');
      bell.setAttribute('part', 'bell');
      const svg = node('svg', null, bell);
      svg.setAttribute('viewBox', '0 0 24 24');
      svg.setAttribute('aria-hidden', 'true');
      for (const [cls, d] of [['body', 'M6 9a6 6 0 0 1 12 0c0 6.2 2.6 8 2.6 8H3.4S6 15.2 6 9'],
        ['clapper', 'M10.2 20.5a2 2 0 0 0 3.6 0'], ['slash', 'M3.5 3.5l17 17']]) {
        node('path', cls, svg).setAttribute('d', d);
      }
      this.ui.card.insertBefore(bell, this.ui.dot);
      this.ui.bell = bell;
      m.bindBell(bell);
      bell.hidden = !this.hasAttribute('notify') || !m.notifier.supported;
    }, (err) => console.warn('ringcast-task: cannot load notifications', err));
  }

  /** Hands a change of the task to the notifier (when `notify` is set and loaded). */
  notify(prevState, news) {
    if (!this.notifier || !this.hasAttribute('notify') || !this.task) return;
    // No icon: the host page's CSP decides which images may load, and ours may not be among them.
    this.notifier.consider(this.getAttribute('server') || '', this.task, prevState, news);
  }

  url() {
    const server = (this.getAttribute('server') || '').replace(/\/+$/, '');
    const task = this.getAttribute('task') || '';
    let url = `${server}/ws?watch=${encodeURIComponent(task)}`;
    if (this.epoch) url += `&since=${this.epoch}:${this.seq}`;
    return url;
  }

  connect() {
    clearTimeout(this.retryTimer);
    this.closeSocket(4001);
    if (!this.getAttribute('server') || !this.getAttribute('task')) {
      this.placeholder('Set the server and task attributes');
      return;
    }
    let ws;
    try {
      ws = new WebSocket(this.url());
    } catch (err) {
      console.warn('ringcast-task: bad server attribute', err);
      this.placeholder('Bad server address');
      return;
    }
    this.ws = ws;
    ws.onmessage = (m) => this.message(ws, m);
    ws.onclose = (e) => this.closed(ws, e);
    ws.onerror = () => {};
    this.arm(10000);
  }

  closeSocket(code) {
    const ws = this.ws;
    if (!ws) return;
    ws.onmessage = ws.onclose = ws.onerror = null;
    this.ws = null;
    clearTimeout(this.watchdog);
    try { ws.close(code); } catch { /* not open yet */ }
  }

  arm(ms) {
    clearTimeout(this.watchdog);
    this.watchdog = setTimeout(() => {
      this.closeSocket(4000);
      this.retry();
    }, ms);
  }

  closed(ws, e) {
    if (ws !== this.ws) return;
    this.ws = null;
    clearTimeout(this.watchdog);
    if (FATAL_CLOSE.has(e.code)) {
      this.setConn('offline', 'Refused by the server');
      return;
    }
    this.retry();
  }

  retry() {
    const delay = Math.random() * Math.min(MAX_DELAY_MS, BASE_DELAY_MS * 2 ** this.attempts);
    this.attempts++;
    this.setConn(this.attempts > 4 ? 'offline' : 'reconnecting', this.attempts > 4 ? 'Offline' : 'Reconnecting…');
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => this.connect(), delay);
  }

  message(ws, m) {
    if (ws !== this.ws || typeof m.data !== 'string') return;
    let data;
    try { data = JSON.parse(m.data); } catch { return; }
    for (const ev of Array.isArray(data) ? data : [data]) if (ev && typeof ev === 'object') this.apply(ev);
    if (ws === this.ws) this.arm(2 * this.heartbeatMs);
    this.schedule();
  }

  apply(ev) {
    const id = this.getAttribute('task');
    if (typeof ev.seq === 'number' && ev.seq > this.seq && ev.type !== 'hello') this.seq = ev.seq;
    switch (ev.type) {
      case 'hello':
        if (typeof ev.now === 'number') this.offset = ev.now - Date.now();
        if (ev.heartbeat > 0) this.heartbeatMs = ev.heartbeat * 1000;
        return;
      case 'heartbeat':
        if (typeof ev.now === 'number') this.offset = ev.now - Date.now();
        return;
      case 'snapshot': {
        const t = (ev.tasks || []).find((x) => x.id === id);
        const before = this.task && this.task.state;
        const news = this.epoch != null; // states in the first snapshot are not news
        if (t) {
          this.task = { ...t };
          this.notify(before, news);
        }
        else if (ev.full !== false || ev.epoch !== this.epoch || (ev.removed || []).includes(id)) this.task = null;
        this.epoch = ev.epoch;
        if (typeof ev.seq === 'number') this.seq = ev.seq;
        this.attempts = 0;
        this.setConn('live', 'Live');
        return;
      }
      case 'remove':
        if (ev.id === id) {
          this.task = null;
          if (this.notifier) this.notifier.forget(this.getAttribute('server') || '', id);
        }
        return;
      case 'error':
        console.warn(`ringcast-task: ${ev.error}: ${ev.message}`);
        return;
      default:
        if (ev.id !== id || !['progress', 'show', 'hide', 'state', 'tick', 'update'].includes(ev.type)) return;
        if (this.task && typeof ev.seq === 'number' && typeof this.task.seq === 'number' && ev.seq < this.task.seq) return;
        const prevState = this.task && this.task.state;
        const t = { ...(this.task || { id, title: id, progress: null, state: 'running', visible: true }), ...ev };
        if (ev.type === 'show' && !('visible' in ev)) t.visible = true;
        if (ev.type === 'hide') t.visible = false;
        if (ev.type === 'tick') {
          t.timer = { ...(ev.timer || (this.task && this.task.timer) || {}) };
          if (typeof ev.remaining === 'number') t.timer.remaining = ev.remaining;
          if (typeof ev.elapsed === 'number') t.timer.elapsed = ev.elapsed;
          if (t.timer.seconds == null && typeof ev.total === 'number') t.timer.seconds = ev.total;
        } else if (this.task && this.task.timer && !ev.timer) t.timer = this.task.timer;
        delete t.type; delete t.remaining; delete t.elapsed;
        this.task = t;
        this.notify(prevState, true);
        if (prevState && prevState !== t.state && (t.state === 'done' || t.state === 'failed')) {
          this.ui.live.textContent = `${t.title || id} ${t.state === 'done' ? 'is done' : 'failed'}`;
        }
    }
  }

  schedule() {
    if (!this.frame) this.frame = requestAnimationFrame(() => this.render());
  }

  write(key, value, apply) {
    if (this.last[key] === value) return;
    this.last[key] = value;
    apply(value);
  }

  placeholder(text) {
    this.write('placeholder', text, (v) => {
      this.ui.placeholder.textContent = v;
      this.ui.placeholder.hidden = !v;
    });
  }

  setConn(state, text) {
    this.ui.dot.dataset.state = state;
    this.ui.dot.setAttribute('aria-label', text);
    this.ui.dot.title = text;
    // Dim what is shown once it is no longer live; nothing is shown before the first snapshot.
    this.ui.card.dataset.conn = state === 'live' || this.epoch ? state : 'connecting';
  }

  render() {
    this.frame = 0;
    const ui = this.ui;
    const t = this.task;
    const now = Date.now() + this.offset;
    const hidden = t && (t.visible === false
      || (typeof t.hideAt === 'number' && t.hideAt <= now && t.hideAt >= (t.updatedAt || 0)));
    this.write('hidden', !!hidden, (v) => { this.hidden = v; });
    const hideAt = t && !hidden && typeof t.hideAt === 'number' ? t.hideAt : null;
    this.write('hideAt', hideAt, (at) => {
      clearTimeout(this.hideTimer);
      if (at != null) this.hideTimer = setTimeout(() => this.schedule(), at - now + 15);
    });
    if (!t) {
      this.placeholder(this.epoch ? `Waiting for ${this.getAttribute('task')}` : 'Connecting…');
      this.write('state', 'none', (v) => { ui.card.dataset.state = v; });
      return;
    }
    this.placeholder('');
    const v = view(t, now);
    const state = t.state || 'running';
    this.write('state', state, (s) => { ui.card.dataset.state = s; });
    this.write('title', t.title || t.id, (s) => { ui.title.textContent = s; ui.ring.setAttribute('aria-label', s); });
    this.write('detail', t.detail || '', (s) => { ui.detail.textContent = s; ui.detail.hidden = !s; });
    const eta = state === 'running' && t.eta != null && (t.progress == null || t.progress < 1) ? `ETA ${fmtDuration(t.eta)}` : '';
    // What its kind usually takes, from past runs (the dashboard's card says the same).
    const usual = state !== 'running' ? '' : [t.slow ? 'slower than usual' : '', t.expectedSeconds > 0 ? `usually ${fmtDuration(t.expectedSeconds)}` : '']
      .filter(Boolean).join(' · ');
    const meta = [eta, usual].filter(Boolean).join(' · ');
    this.write('meta', meta, (s) => { ui.meta.textContent = s; ui.meta.hidden = !s; });
    this.write('badge', state === 'running' ? '' : LABEL[state] || state, (s) => { ui.badge.textContent = s; ui.badge.hidden = !s; });
    this.write('mode', v.mode, (m) => {
      ui.ring.classList.toggle('spinner', m === 'spinner');
      ui.ring.classList.toggle('timer', m === 'timer');
      ui.ring.classList.toggle('static', m === 'static');
      ui.num.classList.toggle('remaining', m === 'timer');
      if (m === 'spinner') ui.ring.setAttribute('aria-busy', 'true');
      else ui.ring.removeAttribute('aria-busy');
      if (m === 'spinner') { ui.arc.style.strokeDashoffset = ''; this.last.offset = undefined; }
    });
    if (v.mode !== 'spinner') {
      const offset = Math.round((100 - Math.min(1, Math.max(0, v.f)) * 100) * 100) / 100;
      this.write('offset', offset, (o) => { ui.arc.style.strokeDashoffset = String(o); });
    }
    this.write('now', v.now, (n) => {
      if (n == null) ui.ring.removeAttribute('aria-valuenow');
      else ui.ring.setAttribute('aria-valuenow', String(n));
    });
    this.write('valuetext', v.valuetext, (s) => ui.ring.setAttribute('aria-valuetext', s));
    this.write('text', v.text, (s) => {
      ui.num.textContent = s;
      ui.num.classList.toggle('icon', s !== '' && !/^\d/.test(s));
    });
    this.write('unit', v.unit, (s) => { ui.unit.textContent = s; });
    if (v.active) this.schedule();
  }
}

if (!customElements.get('ringcast-task')) customElements.define('ringcast-task', RingcastTask);

export { RingcastTask };
