// Ringcast: the client a Node program publishes progress with, over one WebSocket
// (`/ws?mode=publish`). Why a WebSocket and not fetch: the server pushes a dashboard's cancel and
// pause requests only to the sockets that publish a task, stalls a leased task at once when its
// socket closes, and acknowledges with `flushed` what it has kept; over HTTP all three would need
// polling. Reading back (`get`, `readLog`) uses fetch (reading.js).
//
// What waits and how it merges is the outbox's (outbox.js). Frames leave at most every
// `sendInterval` ms unless something urgent waits; what was written is held until the server's
// `flushed` covers it, and written again on the next connection if the socket died first.
//
// The socket and the client's timers do not keep the process alive; while a flush waits they do,
// and when the event loop runs dry ('beforeExit') the client flushes what it still holds first.

import { DEFAULT_URL, endpoint } from './endpoint.js';
import { holdUntilExit, releaseAtExit } from './exit.js';
import { checkId, controlsList, logLines, RingcastError, showFields, timerFields, updateFields } from './fields.js';
import { mirrorBar } from './mirror.js';
import { Outbox } from './outbox.js';
import { chooseProxy } from './proxy.js';
import { MAX_DEPTH, nestedDeeper, request } from './reading.js';
import { runTask } from './task.js';
import { connect, HandshakeRefused } from './websocket.js';

export { MAX_ANSWER, MAX_DEPTH } from './reading.js';

/**
 * A connection to a Ringcast server that publishes tasks in the background.
 *
 * Every call checks its arguments with the server's rules (a bad value throws RingcastError at
 * once) and queues the event; none waits for the network. `url` and `token` default to
 * RINGCAST_URL and RINGCAST_TOKEN, as the `ringcast` command line reads them. Durations of the
 * client itself are milliseconds; fields of the protocol (`staleAfter`, `hideAfter`) are seconds.
 * What the server refuses later rejects the next `flush()`, is kept in `errors` and goes to
 * `onError`; `onControl(id, action)` hears requests for tasks no `task()` or mirror handles.
 */
export class Ringcast {
  constructor({
    url = process.env.RINGCAST_URL || DEFAULT_URL,
    token = process.env.RINGCAST_TOKEN || null,
    sendInterval = 50,
    queueLimit = 10000,
    timeout = 10000,
    exitTimeout = 5000,
    onError = null,
    onControl = null,
    tlsOptions = {},
    proxy = undefined,
  } = {}) {
    if (token !== null && !/^[\x21-\x7e]+$/.test(token)) {
      throw new RingcastError('invalid_token', 'a token is printable ASCII without spaces', { field: 'token' });
    }
    this.url = url;
    this.endpoint = endpoint(url);
    this.token = token;
    this.sendInterval = sendInterval;
    this.queueLimit = queueLimit;
    this.timeout = timeout;
    this.exitTimeout = exitTimeout;
    this.onError = onError;
    this.onControl = onControl;
    this.tlsOptions = tlsOptions;
    /** The HTTP proxy the WebSocket and the reads tunnel through (null: direct); see docs/NODE-CLIENT.md. */
    this.proxy = chooseProxy(proxy, this.endpoint);
    /** Counts of what the client did. */
    this.stats = { accepted: 0, coalesced: 0, sent: 0, frames: 0, markers: 0, connections: 0 };
    /** The newest 256 refusals, oldest first. */
    this.errors = [];

    this.outbox = new Outbox(queueLimit, this.stats);
    this.unraised = [];
    this.flushWaiters = new Set();
    this.leases = new Map();
    this.controls = new Map();
    this.state = 'connecting';
    this.everConnected = false;
    this.failedAttempts = 0;
    this.problem = null;
    this.ws = null;
    this.markerRef = -1;
    this.markers = 0;
    this.lastWrite = 0;
    this.writeTimer = null;
    this.retryTimer = null;
    this.silenceTimer = null;
    this.exitHold = null;
    this.exitTried = false;
    this.attempt = 0;
    holdUntilExit(this);
    this.connect();
  }

  // MARK: publishing

  /** Creates or updates task `id`; only the fields given change, `null` clears one. */
  update(id, fields = {}) {
    checkId(id);
    const { fields: checked, controls } = updateFields(fields);
    if (Object.keys(checked).length > 0 || controls === undefined) this.send('update', id, checked);
    // An event of its own: never merged, and a server that does not know the field refuses only it.
    if (controls !== undefined) this.send('update', id, { controls });
  }

  show(id, fields = {}) {
    checkId(id);
    this.send('show', id, showFields(fields));
  }

  hide(id) {
    checkId(id);
    this.send('hide', id, {});
  }

  timer(id, fields) {
    checkId(id);
    this.send('timer', id, timerFields(fields));
  }

  pauseTimer(id) {
    checkId(id);
    this.send('pause', id, {});
  }

  resumeTimer(id) {
    checkId(id);
    this.send('resume', id, {});
  }

  cancelTimer(id) {
    checkId(id);
    this.send('cancel', id, {});
  }

  /** Appends lines (a string, or an array of strings) to the log tail of task `id`, which must exist. */
  log(id, lines) {
    checkId(id);
    this.send('log', id, { lines: logLines(lines) });
  }

  remove(id) {
    checkId(id);
    this.send('remove', id, {});
  }

  /** Queues one event as the wire spells it (checked already); see Outbox.add. */
  send(type, id, fields, { force = false } = {}) {
    if (this.state === 'closing' || this.state === 'closed') {
      throw new RingcastError('closed', 'the client is closed: make a new Ringcast to publish again', { id });
    }
    this.outbox.add(type, id, fields, { force, why: `for ${this.url} (${this.problem ?? 'not acknowledged yet'})` });
    this.schedule();
  }

  /**
   * Resolves once the server has kept everything queued before the call; rejects with the first
   * refusal the server reported since the last flush, or `timeout` (ms) when no acknowledgement
   * came in time (what is queued stays queued, and goes when the server is back).
   */
  flush({ timeout = this.timeout, unlessUnreached = false } = {}) {
    const target = this.outbox.lastSeq;
    const settle = () => {
      const refused = this.unraised;
      this.unraised = [];
      if (refused.length) throw refused[0];
    };
    if (target <= this.outbox.ackedThrough) return Promise.resolve().then(settle);
    if (this.state === 'closed') return Promise.reject(new RingcastError('closed', 'the client is closed: what was queued and not acknowledged is lost'));
    return new Promise((resolve, reject) => {
      const waiter = { target, resolve, reject, unlessUnreached, timer: null };
      if (timeout !== null) {
        waiter.timer = setTimeout(() => {
          this.flushWaiters.delete(waiter);
          this.updateRef();
          reject(new RingcastError('timeout', `the server at ${this.url} did not acknowledge within ${timeout} ms${this.problem ? ` (${this.problem})` : ''}; the client keeps what is queued and goes on trying`));
        }, timeout);
      }
      this.flushWaiters.add(waiter);
      this.updateRef();
      this.outbox.urgent = true;
      this.schedule();
      this.checkUnreached();
    }).then(settle);
  }

  /** Flushes (at most `timeout` ms) and closes the socket. */
  async close({ timeout = this.timeout } = {}) {
    if (this.state === 'closed' || this.state === 'closing') return;
    try {
      await this.flush({ timeout, unlessUnreached: true });
    } finally {
      this.state = 'closing';
      this.stop();
    }
  }

  stop() {
    this.state = 'closed';
    releaseAtExit(this);
    clearTimeout(this.writeTimer);
    clearTimeout(this.retryTimer);
    clearTimeout(this.silenceTimer);
    clearTimeout(this.exitHold);
    for (const lease of this.leases.values()) clearInterval(lease);
    this.leases.clear();
    if (this.ws) this.ws.close(1000);
    this.ws = null;
    for (const waiter of this.flushWaiters) {
      clearTimeout(waiter.timer);
      waiter.reject(new RingcastError('closed', 'the client closed before the server acknowledged what was queued'));
    }
    this.flushWaiters.clear();
  }

  /** Keeps renewing task `id`'s lease every third of `seconds` (null stops). */
  lease(id, seconds) {
    clearInterval(this.leases.get(id));
    this.leases.delete(id);
    if (seconds === null || seconds === undefined || this.state === 'closed') return;
    const timer = setInterval(() => {
      if (this.state === 'open') this.send('update', id, {}, { force: true });
    }, (seconds * 1000) / 3);
    timer.unref();
    this.leases.set(id, timer);
  }

  /** Routes control requests for `id` to `handler` and queues the event that offers them. */
  offerControls(id, actions, handler) {
    this.controls.set(id, { actions: controlsList(actions), handler });
    this.send('update', id, { controls: controlsList(actions) }, { force: true });
  }

  withdrawControls(id, handler) {
    if (this.controls.get(id)?.handler === handler) this.controls.delete(id);
  }

  /** Runs `body(task)` as task `id` and ends it the way the body ends (see docs/NODE-CLIENT.md). */
  task(id, options, body) {
    return typeof options === 'function' ? runTask(this, id, {}, options) : runTask(this, id, options ?? {}, body);
  }

  /** Mirrors a `progress` (node-progress) bar to task `options.task`, and returns the bar; see docs/NODE-CLIENT.md. */
  mirror(bar, options) {
    return mirrorBar(this, bar, options);
  }

  // MARK: reading back

  async get(id) {
    checkId(id);
    return this.request('GET', `/api/tasks/${id}`);
  }

  async readLog(id) {
    checkId(id);
    return this.request('GET', `/api/tasks/${id}/log`);
  }

  /** One HTTP request to the server; see reading.js for its bounds and errors. */
  request(method, path, body) {
    return request(this, method, path, body);
  }

  get connected() {
    return this.state === 'open';
  }

  // MARK: the connection

  connect() {
    if (this.state === 'closing' || this.state === 'closed') return;
    this.state = 'connecting';
    const headers = this.token ? [['Authorization', `Bearer ${this.token}`]] : [];
    const { host, port, secure, basePath } = this.endpoint;
    connect({ host, port, path: `${basePath}/ws?mode=publish`, secure, headers, timeout: this.timeout, tlsOptions: this.tlsOptions, proxy: this.proxy }).then(
      (ws) => this.opened(ws),
      (error) => {
        let refusal = null;
        if (error instanceof HandshakeRefused) {
          try {
            refusal = RingcastError.fromAnswer(JSON.parse(error.body), error.status);
          } catch {
            refusal = new RingcastError('refused', error.message, { status: error.status });
          }
        }
        this.lost(refusal ? `the server refused the connection: ${refusal}` : `could not connect to ${this.url}: ${error.message}`, this.attempt === 0 ? refusal : null);
      },
    );
  }

  opened(ws) {
    if (this.state === 'closing' || this.state === 'closed') {
      ws.close(1000);
      return;
    }
    this.ws = ws;
    this.markerRef = -1;
    this.markers = 0;
    this.greeted = false;
    this.updateRef();
    ws.on('message', (text) => this.received(ws, text));
    ws.on('close', ({ code, reason, violation }) => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (violation) return this.violated(code, reason);
      this.lost(`the connection to ${this.url} closed (${code}${reason ? `: ${reason}` : ''})`, null, this.greeted ? 'served' : 'unserved');
    });
    this.listen(this.timeout);
  }

  /** Closes a connection that has been silent for `ms`: the "connected but nothing arrives" stall. */
  listen(ms) {
    clearTimeout(this.silenceTimer);
    this.silenceTimer = setTimeout(() => this.ws?.close(1001), ms);
    this.silenceTimer.unref();
  }

  /** The server broke the protocol or a bound; the socket is closed with `code` already. */
  violated(code, reason) {
    const problem = `the server at ${this.url} broke the protocol: ${reason}; closed with ${code}`;
    this.lost(problem, null, 'unserved');
    // Told, not raised by flush(): whether what was sent is kept is flush()'s own answer.
    this.report(new RingcastError('protocol_violation', `${problem}, and reconnecting with back-off. Is ${this.url} a Ringcast server (or a proxy in front of one)?`), false);
    process.emitWarning(`ringcast: ${problem}`);
  }

  /**
   * The connection failed (`outcome` 'failed': it never opened), or opened and ended: 'served'
   * (greeted, and the server kept to the protocol: the back-off starts over) or 'unserved'.
   */
  lost(problem, refusal = null, outcome = 'failed') {
    clearTimeout(this.silenceTimer);
    clearTimeout(this.writeTimer);
    this.writeTimer = null;
    this.failedAttempts += 1;
    this.problem = problem;
    this.outbox.requeue();
    if (refusal) this.report(refusal);
    if (this.state === 'closing' || this.state === 'closed') return;
    this.state = 'waiting';
    if (outcome === 'served') this.attempt = 0;
    const ceiling = Math.min(10000, 250 * 2 ** Math.min(this.attempt, 10));
    // Full jitter; after a connection that opened and did not serve (closed before its hello,
    // broke the protocol) at least half the ceiling, so a server that fails every connection at
    // once cannot draw a run of near-zero waits: its reconnect rate falls off as the ceiling grows.
    const floor = outcome === 'unserved' ? ceiling / 2 : 0;
    const delay = floor + Math.random() * (ceiling - floor);
    this.attempt += 1;
    this.retryTimer = setTimeout(() => this.connect(), delay);
    this.updateRef();
    this.checkUnreached();
  }

  received(ws, text) {
    // Judged before parsing: a parser may recurse, and the nesting is the server's choice.
    if (nestedDeeper(text, MAX_DEPTH)) return ws.close(1009, `the server sent JSON nested deeper than ${MAX_DEPTH} levels (the client\u2019s limit)`, true);
    let message;
    try {
      message = JSON.parse(text);
    } catch {
      return;
    }
    for (const event of Array.isArray(message) ? message : [message]) {
      if (!event || typeof event !== 'object') continue;
      if (event.type === 'hello' && !this.greeted) {
        this.greeted = true;
        this.acknowledges = typeof event.protocol === 'number' && event.protocol >= 2;
        const heartbeat = typeof event.heartbeat === 'number' && event.heartbeat > 0 ? event.heartbeat : 15;
        this.silenceLimit = (2 * heartbeat + 2) * 1000;
        this.state = 'open';
        this.problem = null;
        this.everConnected = true;
        this.stats.connections += 1;
        // A new connection (the server may have restarted): say again which tasks take requests.
        if (this.stats.connections > 1) {
          for (const [id, { actions }] of this.controls) this.send('update', id, { controls: actions }, { force: true });
        }
        this.outbox.urgent = true;
        this.schedule();
      } else if (event.type === 'flushed') {
        this.acknowledged(event.ref);
      } else if (event.type === 'control') {
        this.control(event.id, event.action);
      } else if (event.type === 'error') {
        this.report(RingcastError.fromAnswer(event));
      }
    }
    if (this.greeted) this.listen(this.silenceLimit);
  }

  acknowledged(ref) {
    if (typeof ref !== 'string' || !/^-?\d+$/.test(ref)) return;
    this.markers = Math.max(0, this.markers - 1);
    this.outbox.acknowledge(Number(ref));
    for (const waiter of this.flushWaiters) {
      if (waiter.target <= this.outbox.ackedThrough) {
        clearTimeout(waiter.timer);
        this.flushWaiters.delete(waiter);
        waiter.resolve();
      }
    }
    this.updateRef();
    this.schedule();
  }

  control(id, action) {
    if (typeof id !== 'string' || !['cancel', 'pause', 'resume'].includes(action)) return;
    try {
      const entry = this.controls.get(id);
      if (entry) entry.handler(action);
      else if (this.onControl) this.onControl(id, action);
    } catch (error) {
      process.emitWarning(`ringcast: the handler of a ${action} request for ${id} threw: ${error}`);
    }
  }

  report(error, raiseInFlush = true) {
    this.errors.push(error);
    if (this.errors.length > 256) this.errors.shift();
    if (raiseInFlush) this.unraised.push(error);
    if (this.onError) {
      try {
        this.onError(error);
      } catch (thrown) {
        process.emitWarning(`ringcast: the onError callback threw: ${thrown}`);
      }
    }
  }

  /** Flushes waiting with `unlessUnreached` give up once a first attempt failed and none succeeded. */
  checkUnreached() {
    if (this.everConnected || this.failedAttempts === 0) return;
    for (const waiter of this.flushWaiters) {
      if (!waiter.unlessUnreached) continue;
      clearTimeout(waiter.timer);
      this.flushWaiters.delete(waiter);
      waiter.reject(new RingcastError('unreachable', this.problem ?? `${this.url} was never reached`));
    }
    this.updateRef();
  }

  /** The socket and the retry timer keep the process alive only while someone waits in flush(). */
  updateRef() {
    const hold = this.flushWaiters.size > 0;
    for (const handle of [this.ws, this.retryTimer]) {
      if (handle) hold ? handle.ref() : handle.unref();
    }
  }

  flushBeforeExit() {
    if (this.exitTried || this.state !== 'open' && this.state !== 'connecting' && this.state !== 'waiting') return;
    if (this.outbox.settled) return;
    this.exitTried = true;
    this.flush({ timeout: this.exitTimeout, unlessUnreached: true }).catch((error) => {
      process.emitWarning(error.error === 'unreachable' ? `ringcast: nothing was published: ${error.message}` : `ringcast: at exit: ${error}`);
    });
  }

  // MARK: writing

  /** Whether a flush marker should follow what was written: none is out, or someone waits. */
  needsMarker() {
    return this.acknowledges && this.outbox.lastWritten > this.markerRef && (this.markers === 0 || this.flushWaiters.size > 0);
  }

  schedule() {
    if (this.state !== 'open' || !this.ws) return;
    if (this.outbox.waiting === 0 && !this.needsMarker()) return;
    const due = this.outbox.urgent || this.flushWaiters.size > 0 ? 0 : Math.max(0, this.lastWrite + this.sendInterval - Date.now());
    if (this.writeTimer !== null) {
      if (due > 0 || this.writeTimer.immediate) return;
      clearTimeout(this.writeTimer);
    }
    const run = () => {
      this.writeTimer = null;
      this.write();
    };
    this.writeTimer = setTimeout(run, due);
    this.writeTimer.immediate = due === 0;
    this.writeTimer.unref();
  }

  write() {
    const ws = this.ws;
    if (this.state !== 'open' || !ws) return;
    const now = Date.now();
    if (this.outbox.waiting && (this.outbox.urgent || this.flushWaiters.size > 0 || now >= this.lastWrite + this.sendInterval)) {
      // A protocol 1 server has no acknowledgement: what is written counts as kept.
      for (const events of this.outbox.takeFrames(this.acknowledges)) {
        ws.send(JSON.stringify(events.length === 1 ? events[0] : events));
      }
      this.lastWrite = now;
    }
    if (this.needsMarker()) {
      ws.send(`{"type":"flush","ref":"${this.outbox.lastWritten}"}`);
      this.markerRef = this.outbox.lastWritten;
      this.markers += 1;
      this.stats.markers += 1;
    }
    if (!this.acknowledges) this.acknowledged(String(this.outbox.lastWritten));
    this.schedule();
  }
}
