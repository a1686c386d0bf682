// Which task is whose child, as the page knows it. A parent's card holds its children's cards,
// folds into Recent only when nothing under it runs, stays with its family under a search, and
// counts its steps. Parent chains are followed at most MAX_DEPTH steps (a guard against cycles).

import { TERMINAL, stateOf } from './store.js';

export const MAX_DEPTH = 32;

export class Family {
  /** @param {import('./store.js').Store} store  where the tasks are looked up */
  constructor(store) {
    this.store = store;
    this.children = new Map(); // parent id -> Set of child ids
  }

  /** The ids of `id`'s children, or undefined. */
  of(id) {
    return this.children.get(id);
  }

  link(parent, id) {
    let set = this.children.get(parent);
    if (!set) {
      set = new Set();
      this.children.set(parent, set);
    }
    set.add(id);
  }

  unlink(parent, id) {
    const set = this.children.get(parent);
    if (set) {
      set.delete(id);
      if (!set.size) this.children.delete(parent);
    }
  }

  /** Calls `fn` with `id` and with the id of each task above it. */
  forChain(id, fn) {
    for (let n = 0; id && n < MAX_DEPTH; n++) {
      fn(id);
      const t = this.store.tasks.get(id);
      id = t?.parent;
    }
  }

  /** Whether a shown task under `id` still runs (a finished parent with a running child stays in the grid). */
  runsBelow(id, depth = 0) {
    const kids = this.children.get(id);
    if (!kids || depth > MAX_DEPTH) return false;
    for (const k of kids) {
      const t = this.store.tasks.get(k);
      if (!t || t.visible === false) continue;
      if (!TERMINAL.has(stateOf(t)) || this.runsBelow(k, depth + 1)) return true;
    }
    return false;
  }

  /** Whether `test` holds for a task below `id`. */
  someBelow(id, test, depth = 0) {
    const kids = this.children.get(id);
    if (!kids || depth > MAX_DEPTH) return false;
    for (const k of kids) {
      const t = this.store.tasks.get(k);
      if (t && (test(t) || this.someBelow(k, test, depth + 1))) return true;
    }
    return false;
  }

  /** Whether `test` holds for a task above `task`. */
  someAbove(task, test) {
    let t = task;
    for (let n = 0; t?.parent && n < MAX_DEPTH; n++) {
      t = this.store.tasks.get(t.parent);
      if (t && test(t)) return true;
    }
    return false;
  }

  /** A parent card's line about its steps: "2 of 5 steps done, 1 failed (1 abandoned), 1 stalled". */
  stepsText(id) {
    const kids = this.children.get(id);
    if (!kids || !kids.size) return '';
    let done = 0;
    let failed = 0;
    let abandoned = 0;
    let stalled = 0;
    for (const k of kids) {
      const t = this.store.tasks.get(k);
      if (t && t.state === 'done') done++;
      else if (t && t.state === 'failed') {
        failed++;
        if (typeof t.detail === 'string' && t.detail.startsWith('abandoned:')) abandoned++;
      } else if (t && t.state === 'stalled') stalled++;
    }
    // Stalled and abandoned steps show on their parent, not only inside it.
    return `${done} of ${kids.size} steps done${failed ? `, ${failed} failed` : ''}${abandoned ? ` (${abandoned} abandoned)` : ''}`
      + `${stalled ? `, ${stalled} stalled` : ''}`;
  }
}
