// Scoped tasks: `await rc.task(id, options, async (task) => …)` ends the task the way the body
// ends, and carries the dashboard's cancel and pause requests to the body.

import { Cancelled, RingcastError, checkId, clipDetail, updateFields } from './fields.js';

export const OFFERED = ['cancel', 'pause', 'resume'];

/** What a new run sets, as `ringcast run` does: running, visible, no detail, no pending hide, the lease. */
export function freshFields(staleAfter) {
  return { detail: null, state: 'running', visible: true, hideAfter: null, staleAfter: staleAfter ?? null };
}

/** An error as a task's detail: its name and message, within the server's 1000 characters. */
export function describe(error) {
  if (error instanceof Error) return clipDetail(error.message ? `${error.name}: ${error.message}` : error.name);
  return clipDetail(String(error));
}

/** Whether an error means the work was cancelled rather than failed. */
export function isCancellation(error) {
  return error instanceof Cancelled || (error instanceof Error && error.name === 'AbortError');
}

/**
 * What the dashboard asked of one task. A cancel aborts `signal` (its reason a Cancelled) and
 * makes the next checkpoint throw Cancelled (unless `onCancel` was given: it is called instead);
 * a pause makes the next checkpoint publish `paused` and wait for a resume (then `running`).
 */
export class Control {
  constructor(id, onCancel = null) {
    this.id = id;
    this.onCancel = onCancel;
    this.cancelRequested = false;
    this.pauseRequested = false;
    this.cancelRaised = false;
    this.abort = new AbortController();
    this.waiters = [];
  }

  handle = (action) => {
    if (action === 'cancel' && !this.cancelRequested) {
      this.cancelRequested = true;
      this.abort.abort(new Cancelled(this.id));
      if (this.onCancel) queueMicrotask(this.onCancel);
    } else if (action === 'pause') {
      this.pauseRequested = true;
    } else if (action === 'resume') {
      this.pauseRequested = false;
    }
    if (!this.pauseRequested || this.cancelRequested) for (const wake of this.waiters.splice(0)) wake();
  };

  get pending() {
    return (this.cancelRequested && !this.cancelRaised && !this.onCancel) || this.pauseRequested;
  }

  /** Throws Cancelled once, after a cancel the body has not been told of. */
  throwIfCancelled() {
    if (this.cancelRequested && !this.onCancel && !this.cancelRaised) {
      this.cancelRaised = true;
      throw new Cancelled(this.id);
    }
  }

  async checkpoint(publishState) {
    if (this.pauseRequested && !this.cancelRequested) {
      publishState('paused');
      while (this.pauseRequested && !this.cancelRequested) await new Promise((wake) => this.waiters.push(wake));
      if (!this.cancelRequested) publishState('running');
    }
    this.throwIfCancelled();
  }
}

/** A task inside `rc.task(…)`, or a child of one: report its progress, give it children, end it early. */
export class Task {
  constructor(rc, id, { total = null, weight = null, root = null, control = null, staleAfter = null }) {
    this.rc = rc;
    this.id = id;
    this.total = total;
    this.completed = 0;
    this.weight = weight;
    this.root = root ?? this;
    this.control = control;
    this.staleAfter = staleAfter;
    this.finished = null;
    this.children = [];
  }

  /** Aborted when the dashboard asks to cancel (its reason a Cancelled): pass it to fetch, timers, streams. */
  get signal() {
    return this.root.control?.abort.signal ?? new AbortController().signal;
  }

  get cancelRequested() {
    return this.root.control?.cancelRequested ?? false;
  }

  get isOpen() {
    return this.finished === null && this.root.finished === null;
  }

  /** Reports progress (a fraction, or unit counts), a title or a detail; hears the dashboard first. */
  async update(fields = {}) {
    await this.checkpoint();
    this.publish(fields);
  }

  /** Adds `amount` to `completed` (the task's `total` gives the fraction). */
  async advance(amount = 1) {
    await this.checkpoint();
    this.publish({ completed: this.completed + amount });
  }

  async checkpoint() {
    const control = this.root.control;
    if (control?.pending) await control.checkpoint((state) => this.rc.send('update', this.root.id, { state }));
  }

  publish(given) {
    if (!this.isOpen) return;
    const { progress, completed, total, title, detail } = given;
    const { fields } = updateFields({ progress, completed, total, title, detail });
    if (fields.completed !== undefined && fields.completed !== null) this.completed = fields.completed;
    if (fields.total !== undefined) this.total = fields.total;
    if (this.weight !== null && ('progress' in fields || 'completed' in fields || 'total' in fields)) {
      let fraction = null;
      if ('progress' in fields) fraction = fields.progress;
      else if (this.total) fraction = Math.min(1, this.completed / this.total);
      delete fields.progress;
      delete fields.completed;
      delete fields.total;
      // A child carries its progress as units out of its weight: the server's exact unit roll-up
      // then gives the parent the weighted sum of its children.
      Object.assign(fields, fraction === null ? { progress: null, completed: null } : { progress: fraction, completed: fraction * this.weight, total: this.weight });
    }
    this.rc.send('update', this.id, fields);
  }

  /**
   * A child task `ID.name` whose progress counts `weight` in this one's. It ends when its scope
   * ends (done, or cancelled when the scope did not end done), or earlier with finish(). A parent
   * rolls its children up only while it has no progress of its own: give it no `total`.
   */
  child(name, { title = name, weight = 1, total = null } = {}) {
    if (typeof weight !== 'number' || !(weight > 0) || !Number.isFinite(weight)) {
      throw new RingcastError('invalid_field', `weight ${weight} is out of range: a number above 0 (children of weights 2 and 1: the first counts twice)`, { field: 'weight' });
    }
    const id = checkId(`${this.id}.${name}`);
    const child = new Task(this.rc, id, { total, weight, root: this.root, staleAfter: this.root.staleAfter });
    const { fields } = updateFields({ title, parent: this.id });
    this.rc.send('update', id, { ...freshFields(child.staleAfter), ...fields, progress: 0, completed: 0, total: weight });
    this.rc.lease(id, child.staleAfter);
    this.root.children.push(child);
    return child;
  }

  /** Ends this task now in `state` (a child: its scope goes on). */
  finish(state = 'done', detail) {
    if (!this.isOpen) return;
    const { fields } = updateFields({ state, detail });
    if (state === 'done' && this.weight !== null) Object.assign(fields, { completed: this.weight, total: this.weight });
    this.finished = state;
    this.rc.lease(this.id, null);
    this.rc.send('update', this.id, fields, { force: true });
  }

  log(lines) {
    this.rc.log(this.id, lines);
  }
}

/**
 * Runs `body(task)` as task `id`: fresh at the start (running, visible, old detail and hide
 * cleared), offering cancel, pause and resume (unless `cancellable: false`), its lease
 * (`staleAfter` seconds, 10; null for none) renewed while the body runs. Ends `done` when the body
 * returns, `failed` with the error's name and message when it throws, `cancelled` when it throws
 * Cancelled or an AbortError, or returns after a cancel was asked. Returns or throws what the body
 * does, after waiting (at most the client's timeout) for the server to keep the final state.
 */
export async function runTask(rc, id, { title, total = null, parent, staleAfter = 10, cancellable = true, onCancel = null }, body) {
  checkId(id);
  const control = cancellable ? new Control(id, onCancel) : null;
  const task = new Task(rc, id, { total, control, staleAfter });
  const { fields } = updateFields({ title, parent, ...(total !== null ? { completed: 0, total } : {}) });
  rc.send('update', id, { ...freshFields(staleAfter), ...fields });
  if (control) rc.offerControls(id, OFFERED, control.handle);
  rc.lease(id, staleAfter);
  let result;
  let failure = null;
  try {
    result = await body(task);
  } catch (error) {
    failure = error ?? new Error('undefined was thrown');
  }
  let state = 'done';
  let detail;
  if (failure === null) {
    if (control?.cancelRequested) state = 'cancelled';
  } else if (isCancellation(failure)) {
    state = 'cancelled';
  } else {
    state = 'failed';
    detail = describe(failure);
  }
  for (const child of task.children) if (child.finished === null) child.finish(state === 'done' ? 'done' : 'cancelled');
  if (task.finished === null) task.finish(state, detail);
  if (control) rc.withdrawControls(id, control.handle);
  try {
    await rc.flush();
  } catch {
    // kept in rc.errors; the body's own outcome is what matters here
  }
  if (failure !== null) throw failure;
  return result;
}
