// What a client has queued, written and seen kept: the merge rules and the acknowledgement
// bookkeeping, apart from the socket that carries them.
//
// An update to a task that already has an update waiting is folded into it (the newest value of
// each field wins); states, shows, hides, timers, removals and controls are never merged away, and
// log lines join a waiting log event of the same task. What was written is held until the
// server's `flushed` covers it, and goes back on the queue if the socket died first.

import { RingcastError } from './fields.js';

const SIGNIFICANT = ['state', 'visible', 'modal', 'hideAfter'];
const MERGE_UPDATE = 1;
const MERGE_LOG = 2;
/** The most events one frame carries. */
const FRAME_EVENTS = 1000;
/** The most lines one waiting log event gathers before a new one starts. */
const LOG_LINES = 10000;

export class Outbox {
  /** `limit`: the most distinct events that wait; `stats`: the client's counts, kept up to date. */
  constructor(limit, stats) {
    this.limit = limit;
    this.stats = stats;
    this.queue = [];
    /** The waiting event of each task that a later one may still fold into. */
    this.open = new Map();
    this.unacked = [];
    this.nextSeq = 0;
    this.lastSeq = -1;
    this.ackedThrough = -1;
    this.lastWritten = -1;
    /** Something waits that should leave now, not at the next send interval. */
    this.urgent = false;
  }

  get waiting() {
    return this.queue.length;
  }

  /** Whether everything queued so far has been kept by the server. */
  get settled() {
    return this.lastSeq <= this.ackedThrough;
  }

  /**
   * Queues one event as the wire spells it (checked already). Past `limit` distinct waiting events
   * it throws `queue_full` (`why` says what holds them up) rather than wait, since nothing in one
   * thread could make room.
   */
  add(type, id, fields, { force = false, why = '' } = {}) {
    const significant = type === 'update' && SIGNIFICANT.some((name) => name in fields);
    const controlsOnly = type === 'update' && 'controls' in fields;
    const merge = type === 'log' ? MERGE_LOG : type === 'update' && !controlsOnly ? MERGE_UPDATE : 0;
    const urgent = significant || (type !== 'update' && type !== 'log');
    const waiting = this.open.get(id);
    if (waiting && merge && waiting.merge === merge && this.fold(waiting, fields, significant)) {
      this.stats.accepted += 1;
      this.stats.coalesced += 1;
      if (significant) {
        waiting.urgent = true;
        this.open.delete(id);
        this.urgent = true;
      }
      return;
    }
    if (!force && this.queue.length >= this.limit) {
      throw new RingcastError('queue_full', `${this.limit} events wait ${why}; await flush() before sending more`, { id });
    }
    const slot = { type, id, fields: { ...fields }, seq: this.nextSeq++, merge: significant ? 0 : merge, urgent };
    this.queue.push(slot);
    this.lastSeq = slot.seq;
    this.stats.accepted += 1;
    if (slot.merge) this.open.set(id, slot);
    else this.open.delete(id);
    if (urgent) this.urgent = true;
  }

  fold(waiting, fields, significant) {
    if (waiting.merge === MERGE_LOG) {
      if (waiting.fields.lines.length + fields.lines.length > LOG_LINES) return false;
      waiting.fields.lines.push(...fields.lines);
      return true;
    }
    // Counts without a fraction make the server derive the fraction: an older fraction must not win.
    if (('completed' in fields || 'total' in fields) && !('progress' in fields)) delete waiting.fields.progress;
    Object.assign(waiting.fields, fields);
    if (significant) waiting.merge = 0;
    return true;
  }

  /**
   * The waiting events as frames of at most FRAME_EVENTS, taken off the queue; held until
   * acknowledged when the server acknowledges (`held`), counted as kept at once when it cannot.
   */
  takeFrames(held) {
    const frames = [];
    while (this.queue.length) {
      const taken = this.queue.splice(0, FRAME_EVENTS);
      for (const slot of taken) if (this.open.get(slot.id) === slot) this.open.delete(slot.id);
      this.lastWritten = taken[taken.length - 1].seq;
      if (held) this.unacked.push(...taken);
      else this.ackedThrough = this.lastWritten;
      this.stats.sent += taken.length;
      this.stats.frames += 1;
      frames.push(taken.map(({ type, id, fields }) => ({ type, id, ...fields })));
    }
    this.urgent = false;
    return frames;
  }

  /** The server kept everything through `covered`. */
  acknowledge(covered) {
    if (covered > this.ackedThrough) this.ackedThrough = covered;
    while (this.unacked.length && this.unacked[0].seq <= covered) this.unacked.shift();
  }

  /** The socket died: what it carried and nobody acknowledged goes first on the next one. */
  requeue() {
    this.queue.unshift(...this.unacked);
    this.unacked = [];
  }
}
