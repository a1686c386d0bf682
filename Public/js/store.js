// The client's copy of the server state: tasks by id, the epoch and sequence number it has seen,
// and the offset between the server clock and ours. It applies protocol events and tells
// subscribers what changed; it never touches the DOM.

// Live events that carry a task's fields.
const TASK_EVENTS = new Set(['progress', 'show', 'hide', 'state', 'tick', 'update', 'log']);
// Optional task fields: absent from a full task event means unset.
const OPTIONAL = ['detail', 'completed', 'total', 'hideAt', 'rate', 'eta', 'parent',
  'controls', 'cancelRequested', 'pauseRequested', 'requestWaiting', 'abandonAfter', 'logCount',
  'kind', 'expectedSeconds', 'slow', 'by', 'url'];
// Event fields that are not task fields (a `log` event's lines are the log's, not the task's).
const EVENT_ONLY = ['type', 'remaining', 'elapsed', 'now', 'from', 'lines'];

export class Store {
  constructor() {
    /** @type {Map<string, object>} */
    this.tasks = new Map();
    this.epoch = null;
    this.seq = 0;
    this.offset = 0; // server clock minus local clock, ms
    this.heartbeat = 15; // seconds, from hello
    this.synced = false; // a snapshot was applied on the current connection
    this.everSynced = false;
    this.listeners = new Set();
  }

  subscribe(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  emit(change) {
    for (const fn of this.listeners) fn(change);
  }

  /** Server time now, in Unix ms. */
  serverNow() {
    return Date.now() + this.offset;
  }

  /** The `since` value to resume from, or null before the first snapshot. */
  since() {
    return this.epoch != null && this.everSynced ? `${this.epoch}:${this.seq}` : null;
  }

  connectionLost() {
    this.synced = false;
  }

  setClock(now) {
    if (typeof now === 'number' && Number.isFinite(now)) this.offset = now - Date.now();
  }

  bumpSeq(seq) {
    if (typeof seq === 'number' && seq > this.seq) this.seq = seq;
  }

  /** Applies one protocol event. */
  handle(ev) {
    switch (ev.type) {
      case 'hello':
        this.setClock(ev.now);
        if (ev.heartbeat > 0) this.heartbeat = ev.heartbeat;
        if (!(ev.protocol >= 2)) console.warn(`ringcast: server speaks protocol ${ev.protocol}, this page speaks 4`);
        return;
      case 'snapshot':
        this.snapshot(ev);
        return;
      case 'heartbeat':
        this.setClock(ev.now);
        return;
      case 'remove':
        this.bumpSeq(ev.seq);
        this.remove(ev.id, false);
        return;
      case 'error':
        console.warn(`ringcast: server error ${ev.error}: ${ev.message}${ev.field ? ` (field ${ev.field})` : ''}`);
        return;
      default:
        if (TASK_EVENTS.has(ev.type) && typeof ev.id === 'string') {
          if (ev.type === 'tick') this.setClock(ev.now); // ticks carry the server clock
          this.bumpSeq(ev.seq);
          const applied = this.upsert(ev);
          // Appended lines, for a card that shows the log (js/tail.js).
          if (ev.type === 'log' && applied) this.emit({ type: 'log', id: ev.id, from: ev.from, lines: ev.lines });
        }
    }
  }

  snapshot(s) {
    const tasks = Array.isArray(s.tasks) ? s.tasks : [];
    const epochChanged = s.epoch !== this.epoch;
    const full = s.full !== false || epochChanged;
    if (full) {
      // Replace everything: whatever the snapshot does not hold must not stay on the page.
      const incoming = new Set(tasks.map((t) => t.id));
      for (const id of [...this.tasks.keys()]) {
        if (!incoming.has(id)) this.remove(id, true);
      }
      const old = this.tasks;
      this.tasks = new Map();
      for (const t of tasks) {
        if (typeof t.id !== 'string') continue;
        const task = normalize(t);
        this.tasks.set(t.id, task);
        this.emit({ type: 'task', id: t.id, task, prev: old.get(t.id), source: 'snapshot' });
      }
    } else {
      for (const t of tasks) {
        if (typeof t.id !== 'string') continue;
        const prev = this.tasks.get(t.id);
        const task = normalize(t);
        this.tasks.set(t.id, task);
        this.emit({ type: 'task', id: t.id, task, prev, source: 'snapshot' });
      }
      for (const id of s.removed || []) this.remove(id, false);
    }
    this.epoch = s.epoch;
    if (typeof s.seq === 'number') this.seq = full ? s.seq : Math.max(this.seq, s.seq);
    const first = !this.everSynced;
    this.synced = true;
    this.everSynced = true;
    this.emit({ type: 'synced', full, epochChanged, first });
  }

  upsert(ev) {
    const prev = this.tasks.get(ev.id);
    // An event older than what we hold (e.g. already in the snapshot) changes nothing.
    if (prev && typeof ev.seq === 'number' && typeof prev.seq === 'number' && ev.seq < prev.seq) return false;
    const task = prev ? { ...prev } : { id: ev.id, title: ev.id, progress: null, state: 'running', visible: true, modal: false };
    for (const key in ev) task[key] = ev[key];
    if ('state' in ev && 'visible' in ev) {
      // The event carries the task's current fields: optional ones it lacks are unset.
      for (const key of OPTIONAL) if (!(key in ev)) delete task[key];
    }
    if (ev.type === 'show' && !('visible' in ev)) task.visible = true;
    if (ev.type === 'hide') task.visible = false;
    if (ev.type === 'tick') {
      const timer = { ...(ev.timer || prev?.timer || {}) };
      if (typeof ev.remaining === 'number') timer.remaining = ev.remaining;
      if (typeof ev.elapsed === 'number') timer.elapsed = ev.elapsed;
      if (timer.seconds == null && typeof ev.total === 'number') timer.seconds = ev.total;
      task.timer = timer;
    } else if (prev?.timer && !ev.timer) {
      task.timer = prev.timer;
    }
    for (const key of EVENT_ONLY) delete task[key];
    this.tasks.set(ev.id, task);
    this.emit({ type: 'task', id: ev.id, task, prev, source: 'live' });
    return true;
  }

  remove(id, immediate) {
    if (!this.tasks.has(id)) return;
    const prev = this.tasks.get(id);
    this.tasks.delete(id);
    this.emit({ type: 'remove', id, prev, immediate });
  }
}

/** Makes a snapshot's task object the store's task, in place: a page that falls behind is sent
 *  snapshots of thousands of tasks, ten times a second, and a copy of each costs more than this. */
function normalize(t) {
  if (t.progress === undefined) t.progress = null;
  if (t.state === undefined) t.state = 'running';
  if (t.visible === undefined) t.visible = true;
  if (t.modal === undefined) t.modal = false;
  if (!t.title) t.title = t.id;
  for (const key of EVENT_ONLY) if (key in t) delete t[key];
  return t;
}

/** The states after which a task changes no more. */
export const TERMINAL = new Set(['done', 'failed', 'cancelled']);

/** A task's state; a task that does not say is running. */
export function stateOf(task) {
  return task?.state || 'running';
}

/** A task is on screen when visible and its hideAt (set by the show it belongs to) has not passed. */
export function isShown(task, now) {
  if (!task || task.visible === false) return false;
  if (typeof task.hideAt === 'number' && task.hideAt <= now && task.hideAt >= (task.updatedAt || 0)) return false;
  return true;
}
