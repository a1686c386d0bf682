// What screen readers are told: a task seen finishing or failing, said in a polite live region.
// What arrives between two flushes is said together (the first three, then how many more).

import { stateOf } from './store.js';

/** What a store change (store.js) is worth saying, or '' for nothing. */
export function finishNews(change) {
  const { task, prev, source } = change;
  if (source !== 'live' || !prev) return '';
  const state = stateOf(task);
  if (stateOf(prev) === state || (state !== 'done' && state !== 'failed')) return '';
  return `${task.title || task.id} ${state === 'done' ? 'is done' : 'failed'}`;
}

export class Announcer {
  /** @param {HTMLElement} region  an element with role=status and aria-live=polite */
  constructor(region) {
    this.region = region;
    this.queue = [];
  }

  add(text) {
    if (text) this.queue.push(text);
  }

  /** Says what was added since the last flush, if anything. */
  flush() {
    if (!this.queue.length) return;
    const list = this.queue.splice(0);
    const text = list.length > 3 ? `${list.slice(0, 3).join('. ')}. And ${list.length - 3} more.` : list.join('. ');
    this.region.textContent = text;
  }
}
