// A task shown with hideAfter goes when its hideAt comes, whether or not its `hide` event arrives
// in time: one timer per task says when to render it again.

export class HideTimers {
  /** @param {(id: string) => void} due  the hideAt of `id` has come */
  constructor(due) {
    this.due = due;
    this.timers = new Map(); // id -> {at, handle}
  }

  /** Follows `task`'s hideAt (none when hidden, absent or past) at server time `now` (ms). */
  watch(id, task, now) {
    const at = task && task.visible !== false && typeof task.hideAt === 'number' && task.hideAt > now ? task.hideAt : null;
    const cur = this.timers.get(id);
    if (cur && cur.at === at) return;
    if (cur) clearTimeout(cur.handle);
    if (at == null) {
      this.timers.delete(id);
      return;
    }
    const handle = setTimeout(() => {
      this.timers.delete(id);
      this.due(id);
    }, at - now + 15);
    this.timers.set(id, { at, handle });
  }

  clear() {
    for (const { handle } of this.timers.values()) clearTimeout(handle);
    this.timers.clear();
  }
}
