// The dashboard's overall figures: running, done and failed tasks and the mean progress (for the
// header, the title and the favicon), Recent's count, the empty page and the one-line note.

import { TERMINAL, isShown, stateOf } from './store.js';
import { write } from './dom.js';

export class Summary {
  /**
   * @param {object} o
   * @param {HTMLDetailsElement} o.recentDetails  the Recent disclosure (its summary holds the counts)
   * @param {HTMLElement} o.empty   shown while nothing is on the page
   * @param {HTMLElement} o.note    one line: nothing matches the search, or nothing runs
   * @param {(figures: object) => void} o.onSummary
   */
  constructor({ recentDetails, empty, note, onSummary }) {
    this.recentDetails = recentDetails;
    this.recentCount = recentDetails.querySelector('.recent-count');
    this.recentFailed = recentDetails.querySelector('.recent-failed');
    this.empty = empty;
    this.note = note;
    this.onSummary = onSummary || (() => {});
    this.last = {};
  }

  /**
   * @param {object} o
   * @param {import('./store.js').Store} o.store
   * @param {Map<string, object>} o.cards
   * @param {import('./sections.js').Section} o.live
   * @param {import('./sections.js').Section} o.recent
   * @param {number} o.modals  tasks on the modal overlay
   * @param {import('./filter.js').Filter} o.filter
   * @param {number} now  server time (ms)
   */
  update({ store, cards, live, recent, modals, filter }, now) {
    const states = { running: 0, paused: 0, stalled: 0, failed: 0, cancelled: 0, done: 0 };
    let running = 0;
    let done = 0;
    let failed = 0;
    let sum = 0;
    let counted = 0;
    let shown = 0;
    for (const task of store.tasks.values()) {
      if (!isShown(task, now)) continue;
      shown++;
      // A parent's progress already holds its children's.
      if (task.parent && store.tasks.has(task.parent)) continue;
      const state = stateOf(task);
      if (state in states) states[state]++;
      if (state === 'done') done++;
      else if (state === 'failed') failed++;
      if (TERMINAL.has(state)) continue;
      if (state === 'running' || state === 'stalled') running++;
      if (task.progress != null) {
        sum += Math.min(1, Math.max(0, task.progress));
        counted++;
      }
    }
    let onPage = 0;
    let topLevel = 0;
    for (const card of cards.values()) {
      if (card.leaving) continue;
      onPage++;
      if (!card.el.classList.contains('child')) topLevel++;
    }
    let recentFailed = 0;
    for (const card of recent.items) if (stateOf(store.tasks.get(card.id)) === 'failed') recentFailed++;
    const matching = live.size + recent.size;
    this.recentDetails.hidden = recent.size === 0;
    write(this.last, 'recent', `${recent.size}/${recentFailed}`, () => {
      this.recentCount.textContent = String(recent.size);
      this.recentFailed.textContent = recentFailed ? `${recentFailed} failed` : '';
      this.recentFailed.hidden = !recentFailed;
    });
    const nothing = !store.everSynced || onPage > 0 || modals > 0;
    if (this.empty) this.empty.hidden = nothing;
    let note = '';
    if (filter.active && matching === 0 && onPage > 0) note = `No task matches “${filter.query}”.`;
    else if (live.size === 0 && recent.size > 0) note = 'Nothing running right now. Finished tasks are under Recent.';
    write(this.last, 'note', note, (v) => {
      this.note.textContent = v;
      this.note.hidden = !v;
    });
    this.onSummary({
      running, done, failed, states, shown, pct: counted ? Math.floor((sum / counted) * 100) : null,
      filtered: filter.active, matching, topLevel,
    });
  }
}
