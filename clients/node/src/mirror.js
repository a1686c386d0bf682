// An existing progress bar mirrored to a task: the `progress` package (node-progress, also
// Debian's node-progress), whose bars count with tick() and update() and end with terminate().

import { Cancelled, checkId, clipDetail } from './fields.js';
import { describe, freshFields, isCancellation } from './task.js';

/**
 * Mirrors `bar` to task `task`: every tick (at most every `interval` ms, 250) queues its count and
 * total and its rate as the detail; the task ends `done` when the bar completes (or `end()` is
 * called), and `end(error)` ends it failed (or cancelled, for a Cancelled). The task offers
 * `cancel`: a request makes the bar's next tick() throw Cancelled. Nothing the bar prints changes.
 * Returns the bar, with `bar.ringcast` the mirror ({ id, end(error) }).
 */
export function mirrorBar(rc, bar, { task, title = task, staleAfter = 10, interval = 250, parent } = {}) {
  checkId(task);
  if (bar.ringcast) return bar;
  let last = 0;
  let ended = false;
  let cancelRequested = false;
  let cancelThrown = false;
  const handler = (action) => {
    if (action === 'cancel') cancelRequested = true;
  };
  const observe = () => {
    const fields = { completed: Math.min(bar.curr, bar.total), total: bar.total };
    const elapsed = bar.start ? (Date.now() - bar.start) / 1000 : 0;
    if (elapsed > 0 && bar.curr > 0) fields.detail = clipDetail(`${(bar.curr / elapsed).toPrecision(3)} it/s`);
    rc.update(task, fields);
  };
  const end = (error = null) => {
    if (ended) return;
    ended = true;
    observe();
    if (error === null) rc.send('update', task, { state: 'done' }, { force: true });
    else if (isCancellation(error)) rc.send('update', task, { state: 'cancelled' }, { force: true });
    else rc.send('update', task, { state: 'failed', detail: describe(error) }, { force: true });
    rc.lease(task, null);
    rc.withdrawControls(task, handler);
  };
  const tick = bar.tick;
  bar.tick = function mirroredTick(...args) {
    if (cancelRequested && !cancelThrown && !ended) {
      cancelThrown = true;
      const error = new Cancelled(task);
      end(error);
      throw error;
    }
    const result = tick.apply(bar, args);
    const now = Date.now();
    if (!ended && now - last >= interval) {
      last = now;
      observe();
    }
    if (bar.complete) end();
    return result;
  };
  rc.update(task, { ...freshFields(staleAfter), title, ...(parent ? { parent } : {}), completed: bar.curr, total: bar.total });
  rc.offerControls(task, ['cancel'], handler);
  rc.lease(task, staleAfter);
  bar.ringcast = { id: task, end };
  return bar;
}
