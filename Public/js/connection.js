// The WebSocket to the server: connects, parses frames (one event or an array of events), resumes
// with `since`, reconnects with capped full-jitter exponential back-off, reconnects when the server
// has been silent for two heartbeat intervals (watchdog), and resyncs when the tab is shown again.
// When a WebSocket cannot open, or closes before its snapshot (a proxy that strips Upgrade answers
// the upgrade with an error, or cuts it), the same watch follows over EventSource from
// /api/stream, which the browser resumes by Last-Event-ID; a stream that cannot open either sends
// the next attempt back to the WebSocket.

// Close codes after which retrying the same request cannot help (4429: the token's entry holds all
// the connections it may; docs/PROTOCOL.md).
const FATAL_CLOSE = new Set([1002, 1003, 1007, 1008, 4429]);
// Close codes that ask for a token (none, one that does not hold, one that may not read what is
// watched, one that expired): only signing in helps, so the page is told and nothing is retried.
// 4441 (a reload of the server's configuration took the socket's rights away) is retried like any
// other close: the new rules then let the page in, or refuse it with one of these.
export const SIGN_IN_CLOSE = new Set([4401, 4403, 4440]);
const OPEN_TIMEOUT_MS = 10000;
// The names the server gives its events on a stream (`event:`); a stream carries nothing else.
const STREAM_EVENTS = ['hello', 'snapshot', 'progress', 'tick', 'show', 'hide', 'state', 'remove', 'heartbeat', 'log', 'error'];
const TRANSPORT_NAMES = { websocket: 'WebSocket', eventsource: 'EventSource' };

export class Connection {
  /**
   * @param {object} o
   * @param {(since: string|null) => string} o.url   WebSocket URL for a resume point
   * @param {() => string|null} o.since             current resume point (EPOCH:SEQ)
   * @param {(ev: object) => void} o.onEvent         each protocol event, in order
   * @param {(state: 'live'|'reconnecting'|'offline', text: string) => void} o.onStatus
   * @param {() => void} o.onLost                    the socket is gone; what we show is no longer live
   * @param {(code: number, reason: string) => void} [o.onRefused]  closed for its token (SIGN_IN_CLOSE)
   * @param {() => string|null} [o.greeting]         a first message for each new socket (an `auth`)
   * @param {(since: string|null) => string} [o.streamURL]  /api/stream URL for a resume point: the
   *   fallback when a WebSocket does not get through
   */
  constructor({ url, since, onEvent, onStatus, onLost, onRefused, greeting, streamURL, baseDelay = 500, maxDelay = 15000, offlineAfter = 4 }) {
    this.url = url;
    this.streamURL = typeof EventSource === 'function' ? streamURL || null : null;
    /** 'websocket' or 'eventsource': what the next connection uses, and the current one used. */
    this.transport = 'websocket';
    /** A stream has given this page a snapshot: its own reconnections are worth waiting for. */
    this.streamWorked = false;
    this.onRefused = onRefused || null;
    this.greeting = greeting || (() => null);
    this.since = since;
    this.onEvent = onEvent;
    this.onStatus = onStatus || (() => {});
    this.onLost = onLost || (() => {});
    this.baseDelay = baseDelay;
    this.maxDelay = maxDelay;
    this.offlineAfter = offlineAfter;
    this.ws = null;
    this.attempts = 0;
    this.retryTimer = 0;
    this.watchdog = 0;
    this.heartbeatMs = 15000;
    this.hiddenAt = 0;
    this.stopped = false;
    this.state = null;
  }

  start() {
    // Listening to the page ends with close(); stop() alone is undone by the page coming back.
    this.listening = new AbortController();
    const signal = this.listening.signal;
    document.addEventListener('visibilitychange', () => this.visibilityChanged(), { signal });
    window.addEventListener('online', () => this.reconnectNow(), { signal });
    window.addEventListener('offline', () => this.setStatus('offline', 'Offline'), { signal });
    window.addEventListener('pagehide', () => this.stop(), { signal });
    // Back from the back/forward cache: the socket was closed on pagehide, open a new one.
    window.addEventListener('pageshow', (e) => {
      if (!e.persisted) return;
      this.stopped = false;
      this.onLost();
      this.setStatus('reconnecting', 'Reconnecting…');
      this.reconnectNow();
    }, { signal });
    this.connect();
  }

  /** Closes the socket and tries no more until the page is shown again (pageshow). */
  stop() {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    clearTimeout(this.watchdog);
    if (this.ws) {
      const ws = this.ws;
      this.detach();
      try { ws.close(1000, 'page closed'); } catch { /* already closed */ }
    }
  }

  /** Stops for good: the socket is closed and the page's events are no longer followed
   *  (an embedded widget taken out of its page). */
  close() {
    this.stop();
    if (this.listening) this.listening.abort();
  }

  connect() {
    if (this.stopped) return;
    clearTimeout(this.retryTimer);
    this.retryTimer = 0;
    if (this.ws) this.drop(4001, 'replaced');
    if (this.transport === 'eventsource') {
      this.openStream();
      return;
    }
    let ws;
    try {
      ws = new WebSocket(this.url(this.since()));
    } catch (err) {
      console.warn('ringcast: cannot open WebSocket', err);
      this.retry();
      return;
    }
    this.ws = ws;
    ws.onopen = () => {
      ws.openedAt = Date.now();
      const first = this.greeting();
      if (first && ws === this.ws) ws.send(first);
    };
    ws.onmessage = (m) => this.message(ws, m);
    ws.onclose = (e) => this.closed(ws, e);
    ws.onerror = () => {}; // a close event follows
    this.arm(OPEN_TIMEOUT_MS);
  }

  message(ws, m) {
    if (ws !== this.ws || typeof m.data !== 'string') return;
    let data;
    try {
      data = JSON.parse(m.data);
    } catch {
      console.warn('ringcast: ignoring a frame that is not JSON');
      return;
    }
    const events = Array.isArray(data) ? data : [data];
    for (const ev of events) {
      if (!ev || typeof ev !== 'object') continue;
      if (ev.type === 'hello' && ev.heartbeat > 0) this.heartbeatMs = ev.heartbeat * 1000;
      this.onEvent(ev);
      if (ev.type === 'snapshot') {
        ws.synced = true;
        if (this.transport === 'eventsource') this.streamWorked = true;
        this.attempts = 0;
        this.setStatus('live', `Live · ${TRANSPORT_NAMES[this.transport]}`);
      }
    }
    if (ws === this.ws) this.arm(2 * this.heartbeatMs);
  }

  /** The same watch over EventSource. `this.ws` holds it too, so stop, drop and the watchdog
   *  treat both alike; the browser reconnects it by itself (Last-Event-ID), as `retry:` says. */
  openStream() {
    let es;
    try {
      es = new EventSource(this.streamURL(this.since()));
    } catch (err) {
      console.warn('ringcast: cannot open EventSource', err);
      this.transport = 'websocket';
      this.retry();
      return;
    }
    this.ws = es;
    const deliver = (m) => this.message(es, m);
    for (const type of STREAM_EVENTS) es.addEventListener(type, deliver);
    es.onmessage = deliver;
    es.onerror = () => {
      if (es !== this.ws) return;
      if (es.readyState === EventSource.CONNECTING && (es.synced || this.streamWorked)) {
        // Reconnecting by itself, from the last event id it saw (the watchdog still stands guard).
        if (es.synced) {
          es.synced = false;
          this.onLost();
          this.setStatus('reconnecting', 'Reconnecting…');
          this.arm(OPEN_TIMEOUT_MS);
        }
        return;
      }
      // Never got through (an HTTP error, a proxy's page): the next attempt is a WebSocket again.
      this.detach();
      this.onLost();
      this.transport = 'websocket';
      this.retry();
    };
    this.arm(OPEN_TIMEOUT_MS);
  }

  /** (Re)starts the watchdog: silence for `ms` means the connection is dead even if TCP says not. */
  arm(ms) {
    clearTimeout(this.watchdog);
    this.watchdog = setTimeout(() => {
      if (!this.ws) return;
      console.warn(`ringcast: no message from the server for ${Math.round(ms / 1000)} s, reconnecting`);
      this.drop(4000, 'watchdog');
      this.retry();
    }, ms);
  }

  closed(ws, e) {
    if (ws !== this.ws) return;
    this.detach();
    this.onLost();
    if (this.stopped) return;
    // Refused before or right after its upgrade, for no reason the server gave: something on the
    // way does not pass WebSockets. A close the server explains (4401…) is not that.
    if (this.streamURL && !ws.synced && !SIGN_IN_CLOSE.has(e.code) && !FATAL_CLOSE.has(e.code) && e.code < 4000) {
      this.transport = 'eventsource';
      console.warn(`ringcast: the WebSocket ${ws.openedAt ? 'closed before its snapshot' : 'did not open'} (${e.code}); following /api/stream instead`);
    }
    if (SIGN_IN_CLOSE.has(e.code) && this.onRefused) {
      this.setStatus('offline', e.code === 4440 ? 'Signed out: the token expired' : 'Sign in to see tasks');
      this.onRefused(e.code, e.reason);
      return;
    }
    if (FATAL_CLOSE.has(e.code)) {
      // The server refused this request; only a new page state (visible, online) tries again.
      this.setStatus('offline', `Refused by the server${e.reason ? `: ${e.reason}` : ''}`);
      this.retryTimer = setTimeout(() => this.connect(), this.maxDelay * 4);
      return;
    }
    this.retry();
  }

  /** Forgets the current socket without waiting for its close handshake. */
  drop(code, reason) {
    const ws = this.ws;
    if (!ws) return;
    this.detach();
    try {
      if (typeof EventSource === 'function' && ws instanceof EventSource) ws.close(); else ws.close(code, reason);
    } catch { /* not open yet */ }
    this.onLost();
  }

  detach() {
    const ws = this.ws;
    if (!ws) return;
    ws.onopen = ws.onmessage = ws.onclose = ws.onerror = null;
    if (typeof EventSource === 'function' && ws instanceof EventSource) ws.close();
    this.ws = null;
    clearTimeout(this.watchdog);
  }

  /** Schedules the next attempt: random in [0, min(cap, base·2^n)) (full jitter). */
  retry() {
    if (this.stopped) return;
    clearTimeout(this.retryTimer);
    const ceiling = Math.min(this.maxDelay, this.baseDelay * 2 ** this.attempts);
    const delay = Math.random() * ceiling;
    this.attempts++;
    const offline = this.attempts > this.offlineAfter || navigator.onLine === false;
    const secs = Math.ceil(delay / 1000);
    this.setStatus(offline ? 'offline' : 'reconnecting',
      offline ? `Offline · retrying${secs > 1 ? ` in ${secs} s` : ''}` : 'Reconnecting…');
    this.retryTimer = setTimeout(() => this.connect(), delay);
  }

  reconnectNow() {
    if (this.stopped) return;
    if (this.isOpen()) return;
    this.attempts = 0;
    this.connect();
  }

  visibilityChanged() {
    if (document.hidden) {
      this.hiddenAt = Date.now();
      return;
    }
    if (!this.isOpen()) {
      this.reconnectNow();
    } else if (this.hiddenAt && Date.now() - this.hiddenAt > this.heartbeatMs) {
      // Background tabs are throttled: ask the server what changed rather than trust what we hold.
      this.attempts = 0;
      this.connect();
    }
  }

  /** Whether the socket or stream is open (both say 1). */
  isOpen() { return !!this.ws && this.ws.readyState === 1; }

  setStatus(state, text) {
    if (this.state === state && this.text === text) return;
    this.state = state;
    this.text = text;
    this.onStatus(state, text, this.transport);
  }
}

/** The ws(s) address of the server that served `location` (a page of the dashboard). */
export function pageServer(location) {
  return `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}`;
}

/** The URL of `/api/stream` on `server` (ws(s):// or http(s)://, maybe with a path): the same
 *  watch as `socketURL`'s, with heartbeats as events so the watchdog hears them. */
export function streamURL(server, watch, since) {
  const enc = (s) => encodeURIComponent(s).replace(/%2C/gi, ',').replace(/%3A/gi, ':');
  const base = server.replace(/\/+$/, '').replace(/^ws(s?):/i, 'http$1:');
  let url = `${base}/api/stream?watch=${enc(watch || '*')}&heartbeat=event`;
  if (since) url += `&since=${enc(since)}`;
  return url;
}

/** The URL of `/ws` on `server` (ws:// or wss://, maybe with a path), with the watch patterns and resume point. */
export function socketURL(server, watch, since) {
  const enc = (s) => encodeURIComponent(s).replace(/%2C/gi, ',').replace(/%3A/gi, ':');
  let url = `${server.replace(/\/+$/, '')}/ws?watch=${enc(watch || '*')}`;
  if (since) url += `&since=${enc(since)}`;
  return url;
}
