// Where a card goes. Inside its parent's card when the parent is on the page; else in Recent when
// it is done, failed or cancelled and nothing under it still runs (a finished parent with a
// running child stays in the grid; a finished child of a running parent stays inside it); else in
// the live grid. A task seen finishing stays in place for FOLD_AFTER_MS first. A card that goes
// leaves with an animation, and its children go back to a section rather than leave with it.

import { TERMINAL, stateOf } from './store.js';
import { isRendered } from './sections.js';
import { el } from './dom.js';

export const FOLD_AFTER_MS = 4000;
const DISMISSED_KEY = 'ringcast-dismissed';

function readDismissed() {
  try {
    const ids = JSON.parse(sessionStorage.getItem(DISMISSED_KEY) || '[]');
    return Array.isArray(ids) ? ids.filter((id) => typeof id === 'string') : [];
  } catch {
    return [];
  }
}
const LEAVE_FALLBACK_MS = 700;

export class Placement {
  /**
   * @param {object} o
   * @param {Map<string, object>} o.cards   id -> card (card.js), owned by the dashboard
   * @param {import('./family.js').Family} o.family
   * @param {import('./filter.js').Filter} o.filter
   * @param {import('./sections.js').Section} o.live
   * @param {import('./sections.js').Section} o.recent
   * @param {HTMLDetailsElement} o.recentDetails  the disclosure around Recent
   * @param {(id: string) => void} o.rerender  the task's card must be rendered again
   * @param {(card: object) => void} o.gone    a dropped card has left the page
   */
  constructor({ cards, family, filter, live, recent, recentDetails, rerender, gone }) {
    this.cards = cards;
    this.family = family;
    this.filter = filter;
    this.live = live;
    this.recent = recent;
    this.recentDetails = recentDetails;
    this.rerender = rerender;
    this.gone = gone;
    this.foldAt = new Map(); // id -> performance.now() when a task seen finishing may fold
    // Failures the reader dismissed (Dismiss on the card): only these fold into Recent. Kept
    // for the tab's life, so a reload does not bring them back.
    this.dismissed = new Set(readDismissed());
  }

  /** The reader has seen `id`'s failure: it may fold into Recent now. */
  dismiss(id) {
    this.dismissed.add(id);
    try {
      sessionStorage.setItem(DISMISSED_KEY, JSON.stringify([...this.dismissed].slice(-1000)));
    } catch { /* storage full or off: dismissed for this page only */ }
    this.foldAt.delete(id);
    this.rerender(id);
  }

  /** Whether a failed task still waits to be dismissed (its card offers Dismiss). */
  awaitsDismissal(task) {
    return stateOf(task) === 'failed' && !this.dismissed.has(task.id);
  }

  /** The page saw `id` finish: its card stays where it is a moment, then may fold into Recent. */
  sawFinish(id) {
    this.foldAt.set(id, performance.now() + FOLD_AFTER_MS);
    setTimeout(() => this.rerender(id), FOLD_AFTER_MS + 20);
  }

  /** `id` runs again, or is gone: no fold waits for it, and a later failure waits for dismissal again. */
  forgetFinish(id) {
    this.foldAt.delete(id);
    this.dismissed.delete(id);
  }

  /** Puts a card in its parent's card when the parent is on the page, else in its section.
   *  Returns whether the sections' contents changed. */
  place(card, task, fresh) {
    const parent = task.parent ? this.cards.get(task.parent) : null;
    const from = card.el.parentNode;
    if (parent && !parent.leaving && parent !== card && !card.el.contains(parent.el)) {
      if (card.section) card.section.remove(card);
      if (!parent.childBox) {
        parent.childBox = el('div', 'children');
        parent.childBox.setAttribute('role', 'group');
        parent.childBox.setAttribute('aria-label', `Steps of ${parent.title.textContent || parent.id}`);
        parent.el.insertBefore(parent.childBox, parent.more);
      }
      if (from !== parent.childBox) {
        parent.childBox.append(card.el);
        card.el.classList.add('child');
        card.el.tabIndex = -1; // one Tab stop per top-level card; arrow keys reach its steps
        syncParent(from);
        syncParent(parent.childBox);
      }
      card.el.hidden = !this.filter.passes(task);
      return false;
    }
    // Top level: not a child any more (a filtered-out child was hidden; here the section decides).
    if (card.el.hidden || card.el.classList.contains('child')) {
      card.el.classList.remove('child');
      card.el.tabIndex = 0;
      card.el.hidden = false;
    }
    let target = null;
    if (this.filter.passes(task)) target = this.folds(task) ? this.recent : this.live;
    const key = target === this.recent ? -(task.updatedAt || 0) : liveKey(task);
    if (card.section === target && (target || !from) && (target !== this.live || card.key === key)) return false;
    const folding = card.section === this.live && target === this.recent;
    if (card.section) card.section.remove(card);
    else if (from) card.el.remove();
    syncParent(from);
    if (target) target.insert(card, key, fresh || folding);
    return true;
  }

  /** Whether a task goes to Recent: finished, not just seen finishing, nothing under it running. */
  folds(task) {
    if (!TERMINAL.has(stateOf(task))) return false;
    // A failure stays in the live grid, first, until someone has seen it.
    if (this.awaitsDismissal(task)) return false;
    const at = this.foldAt.get(task.id);
    if (at != null) {
      if (at > performance.now()) return false;
      this.foldAt.delete(task.id);
    }
    return !this.family.runsBelow(task.id);
  }

  /** Animates a card out, then takes it off the page; `immediate` takes it off now. */
  drop(card, immediate) {
    if (card.leaving && !immediate) return;
    // Children go back to a section rather than leave with their parent.
    if (card.childBox) {
      for (const kid of [...card.childBox.children]) {
        kid.remove();
        kid.classList.remove('child');
        this.rerender(kid.dataset.id);
      }
      syncParent(card.childBox);
    }
    const finish = () => {
      clearTimeout(card.leaveTimer);
      const box = card.el.parentNode;
      if (card.section) card.section.remove(card);
      else card.el.remove();
      syncParent(box);
      this.gone(card);
    };
    if (immediate || document.hidden || !card.el.isConnected || !isRendered(card.el)) {
      finish();
      return;
    }
    card.leaving = true;
    card.el.classList.add('leaving');
    card.el.inert = true;
    card.el.setAttribute('aria-hidden', 'true');
    card.onEnd = (e) => {
      if (e.target === card.el && card.leaving) finish();
    };
    card.el.addEventListener('animationend', card.onEnd);
    card.leaveTimer = setTimeout(finish, LEAVE_FALLBACK_MS);
  }

  /** A card that was leaving is shown again. */
  keep(card) {
    clearTimeout(card.leaveTimer);
    card.el.removeEventListener('animationend', card.onEnd);
    card.leaving = false;
    card.el.classList.remove('leaving');
    card.el.inert = false;
    card.el.removeAttribute('aria-hidden');
  }

  /** Brings a card into view and focus, opening Recent if it is there. */
  reveal(card) {
    if (!card.el.isConnected) return;
    if (card.section === this.recent) this.recentDetails.open = true;
    card.el.scrollIntoView({ block: 'center' });
    card.el.focus({ preventScroll: true });
  }
}

/** Where a card stands in the live grid, the same after every reload and on every screen:
 *  failed first, then stalled, then the rest; within each, by id. */
export function liveKey(task) {
  const state = stateOf(task);
  const rank = state === 'failed' ? 0 : state === 'stalled' ? 1 : 2;
  return `${rank}${task.id}`;
}

/** Marks the card owning a children box while it holds any (it then spans two grid rows). */
function syncParent(box) {
  if (!box || !box.classList || !box.classList.contains('children')) return;
  box.parentNode.classList.toggle('parent', box.childElementCount > 0);
  // Rows it spans, about as many as its steps fill (a step is most of a card's height), so its
  // neighbours pack beside it without a hole (style.css, --rows).
  box.parentNode.style.setProperty('--rows', String(1 + Math.ceil(box.childElementCount * 0.8)));
}
