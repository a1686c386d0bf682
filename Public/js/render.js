// Renders the store into the page: task cards in the grid (children inside their parent), the
// modal overlay and the live-region announcements. Changes are batched: a task is rendered at most
// once per animation frame however many events arrive, and only attributes or text that changed
// are written. Countdown rings are advanced every frame from the timer's end time.

import { createRing, setRing, ringView, stateLabel } from './ring.js';
import { formatDuration, formatRate, formatUnits } from './format.js';
import { isShown } from './store.js';

const TERMINAL = new Set(['done', 'failed', 'cancelled']);
const LEAVE_FALLBACK_MS = 700;

let nextDomId = 0;

function el(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text != null) e.textContent = text;
  return e;
}

/** Calls `apply(value)` unless `value` is what was written last under `key` (skips unchanged DOM writes). */
function write(last, key, value, apply) {
  if (last[key] === value) return;
  last[key] = value;
  apply(value);
}

export class Dashboard {
  /**
   * @param {object} o
   * @param {import('./store.js').Store} o.store
   */
  constructor({ store, grid, empty, overlay, modalList, announcer, blockWhileModal, onSummary }) {
    this.store = store;
    this.grid = grid;
    this.empty = empty;
    this.overlay = overlay;
    this.modalList = modalList;
    this.announcer = announcer;
    this.blockWhileModal = blockWhileModal || [];
    this.onSummary = onSummary || (() => {});
    /** id -> card: {el, ring, title, detail, …, childBox, leaving, last: what was last written} */
    this.cards = new Map();
    this.modals = new Map();
    this.children = new Map(); // parent id -> Set of child ids
    this.dirty = new Set();
    this.timers = new Set(); // ids whose countdown moves by itself
    this.hideTimers = new Map(); // id -> {at, handle}
    this.announcements = [];
    this.summaryDirty = true;
    this.frame = 0;
    this.restoreFocus = null;
    this.flush = this.flush.bind(this);
    store.subscribe((c) => this.onChange(c));
    grid.addEventListener('click', (e) => this.toggleFromEvent(e));
    grid.addEventListener('keydown', (e) => {
      if ((e.key === 'Enter' || e.key === ' ') && e.target.classList.contains('task')) {
        e.preventDefault();
        this.toggleFromEvent(e);
      }
    });
    // Keyboard input never reaches the page behind a modal overlay (browser shortcuts still work).
    document.addEventListener('keydown', (e) => {
      if (e.ctrlKey || e.metaKey || e.altKey) return;
      if (!this.overlay.hidden && !this.overlay.contains(e.target)) {
        e.preventDefault();
        e.stopPropagation();
        this.overlay.focus();
      }
    }, true);
  }

  onChange(c) {
    if (c.type === 'task') {
      const { task, prev } = c;
      if ((prev && prev.parent) !== task.parent) {
        if (prev && prev.parent) this.unlinkChild(prev.parent, c.id);
        if (task.parent) this.linkChild(task.parent, c.id);
      }
      if (task.parent) this.mark(task.parent);
      if (c.source === 'live' && prev && prev.state !== task.state && (task.state === 'done' || task.state === 'failed')) {
        this.announcements.push(`${task.title || task.id} ${task.state === 'done' ? 'is done' : 'failed'}`);
      }
      this.mark(c.id);
    } else if (c.type === 'remove') {
      if (c.prev && c.prev.parent) {
        this.unlinkChild(c.prev.parent, c.id);
        this.mark(c.prev.parent);
      }
      if (c.immediate) this.drop(c.id, true);
      this.mark(c.id);
    } else if (c.type === 'synced') {
      this.summaryDirty = true;
      this.schedule();
    }
  }

  linkChild(parent, id) {
    let set = this.children.get(parent);
    if (!set) this.children.set(parent, (set = new Set()));
    set.add(id);
  }

  unlinkChild(parent, id) {
    const set = this.children.get(parent);
    if (set) {
      set.delete(id);
      if (!set.size) this.children.delete(parent);
    }
  }

  mark(id) {
    this.dirty.add(id);
    this.summaryDirty = true;
    this.schedule();
  }

  schedule() {
    if (!this.frame) this.frame = requestAnimationFrame(this.flush);
  }

  /** One animation frame: render every task that changed, then advance the running countdowns. */
  flush() {
    this.frame = 0;
    const now = this.store.serverNow();
    for (let round = 0; round < 3 && this.dirty.size; round++) {
      const ids = [...this.dirty];
      this.dirty.clear();
      for (const id of ids) this.render(id, now);
    }
    for (const id of this.timers) {
      const card = this.cards.get(id) || this.modals.get(id);
      const task = this.store.tasks.get(id);
      if (!card || !task || card.leaving) {
        this.timers.delete(id);
        continue;
      }
      const view = ringView(task, now);
      setRing(card.ring, view);
      if (!view.active) this.timers.delete(id);
    }
    if (this.announcements.length) this.announce();
    if (this.summaryDirty) {
      this.summaryDirty = false;
      this.summarize(now);
    }
    if (this.timers.size || this.dirty.size) this.schedule();
  }

  render(id, now) {
    const task = this.store.tasks.get(id);
    const shown = isShown(task, now);
    this.watchHideAt(id, task, now);
    if (!shown || !task.modal) this.dropModal(id);
    if (!shown || task.modal) {
      this.drop(id, false);
      if (!shown) this.timers.delete(id);
      if (!shown) return;
    }
    if (task.modal) {
      this.renderModal(task, now);
      return;
    }
    let card = this.cards.get(id);
    if (!card) {
      card = this.createCard(task);
      this.cards.set(id, card);
      // Children that arrived first move inside.
      const kids = this.children.get(id);
      if (kids) for (const kid of kids) this.dirty.add(kid);
    } else if (card.leaving) {
      this.keep(card);
    }
    this.place(card, task);
    this.updateCard(card, task, now);
  }

  /** Re-renders a task when its hideAt comes, in case its `hide` event does not. */
  watchHideAt(id, task, now) {
    const at = task && task.visible !== false && typeof task.hideAt === 'number' && task.hideAt > now ? task.hideAt : null;
    const cur = this.hideTimers.get(id);
    if (cur && cur.at === at) return;
    if (cur) clearTimeout(cur.handle);
    if (at == null) {
      this.hideTimers.delete(id);
      return;
    }
    const handle = setTimeout(() => {
      this.hideTimers.delete(id);
      this.mark(id);
    }, at - now + 15);
    this.hideTimers.set(id, { at, handle });
  }

  createCard(task) {
    const root = el('article', 'task');
    root.dataset.id = task.id;
    root.tabIndex = 0;
    root.dataset.expanded = 'false';
    const titleId = `task-title-${++nextDomId}`;
    root.setAttribute('aria-labelledby', titleId);
    const main = el('div', 'task-main');
    const ring = createRing();
    const info = el('div', 'info');
    const head = el('div', 'head');
    const title = el('h2', 'title');
    title.id = titleId;
    const badge = el('span', 'badge');
    badge.hidden = true;
    head.append(title, badge);
    const detail = el('p', 'detail');
    const meta = el('p', 'meta');
    const units = el('span', 'units');
    const rate = el('span', 'rate');
    const eta = el('span', 'eta');
    meta.append(units, rate, eta);
    const kids = el('p', 'kids');
    kids.hidden = true;
    info.append(head, detail, meta, kids);
    main.append(ring.el, info);
    const more = el('dl', 'more');
    more.hidden = true;
    const moreId = el('dd', 'more-id', task.id);
    const moreUpdated = el('dd', 'more-updated');
    more.append(el('dt', null, 'id'), moreId, el('dt', null, 'updated'), moreUpdated);
    root.append(main, more);
    return {
      id: task.id, el: root, ring, title, badge, detail, meta, units, rate, eta, kids, more, moreUpdated,
      childBox: null, leaving: false, leaveTimer: 0, last: {},
    };
  }

  /** Puts a card in its parent's card when the parent is on the page, else in the grid. */
  place(card, task) {
    const parent = task.parent ? this.cards.get(task.parent) : null;
    let box = this.grid;
    if (parent && !parent.leaving && parent !== card) {
      if (!parent.childBox) {
        parent.childBox = el('div', 'children');
        parent.childBox.setAttribute('role', 'group');
        parent.childBox.setAttribute('aria-label', `Steps of ${parent.title.textContent}`);
        parent.el.insertBefore(parent.childBox, parent.more);
      }
      box = parent.childBox;
    }
    const from = card.el.parentNode;
    if (from !== box) {
      box.append(card.el);
      card.el.classList.toggle('child', box !== this.grid);
      this.syncParent(from);
      this.syncParent(box);
    }
  }

  /** Marks the card owning a children box while it holds any (it then spans two grid rows). */
  syncParent(box) {
    if (!box || !box.classList || !box.classList.contains('children')) return;
    box.parentNode.classList.toggle('parent', box.childElementCount > 0);
  }

  updateCard(card, task, now) {
    const L = card.last;
    const root = card.el;
    write(L, 'state', task.state || 'running', (v) => { root.dataset.state = v; });
    write(L, 'title', task.title || task.id, (v) => { card.title.textContent = v; });
    const detail = task.detail || '';
    write(L, 'detail', detail, (v) => {
      card.detail.textContent = v;
      card.detail.hidden = !v;
    });
    const running = (task.state || 'running') === 'running';
    const units = formatUnits(task);
    const rate = running ? formatRate(task) : '';
    const eta = running && task.eta != null && task.progress != null && task.progress < 1 ? `ETA ${formatDuration(task.eta)}` : '';
    write(L, 'units', units, (v) => { card.units.textContent = v; });
    write(L, 'rate', rate, (v) => { card.rate.textContent = v; });
    write(L, 'eta', eta, (v) => { card.eta.textContent = v; });
    write(L, 'meta', !(units || rate || eta), (v) => { card.meta.hidden = v; });
    write(L, 'badge', running ? '' : stateLabel(task.state), (v) => {
      card.badge.textContent = v;
      card.badge.hidden = !v;
    });
    write(L, 'kids', this.childSummary(task.id), (v) => {
      card.kids.textContent = v;
      card.kids.hidden = !v;
    });
    if (L.expanded) {
      write(L, 'updated', task.updatedAt ? new Date(task.updatedAt).toLocaleTimeString() : '', (v) => { card.moreUpdated.textContent = v; });
    }
    const view = ringView(task, now);
    setRing(card.ring, view);
    if (view.active) this.timers.add(task.id);
    else this.timers.delete(task.id);
  }

  childSummary(id) {
    const kids = this.children.get(id);
    if (!kids || !kids.size) return '';
    let done = 0;
    let failed = 0;
    for (const k of kids) {
      const t = this.store.tasks.get(k);
      if (t && t.state === 'done') done++;
      else if (t && t.state === 'failed') failed++;
    }
    return `${done} of ${kids.size} steps done${failed ? `, ${failed} failed` : ''}`;
  }

  toggleFromEvent(e) {
    const root = e.target.closest && e.target.closest('.task');
    if (!root) return;
    const card = this.cards.get(root.dataset.id);
    if (!card || card.leaving) return;
    const open = !card.last.expanded;
    card.last.expanded = open;
    card.more.hidden = !open;
    root.dataset.expanded = String(open);
    const task = this.store.tasks.get(card.id);
    if (open && task) card.moreUpdated.textContent = task.updatedAt ? new Date(task.updatedAt).toLocaleTimeString() : '';
  }

  /** Animates a card out, then removes it; `immediate` removes it now. */
  drop(id, immediate) {
    const card = this.cards.get(id);
    if (!card) return;
    if (card.leaving && !immediate) return;
    // Children go back to the grid rather than leave with their parent.
    if (card.childBox) {
      for (const kid of [...card.childBox.children]) {
        this.grid.append(kid);
        kid.classList.remove('child');
      }
      this.syncParent(card.childBox);
    }
    const finish = () => {
      clearTimeout(card.leaveTimer);
      const box = card.el.parentNode;
      card.el.remove();
      this.syncParent(box);
      if (this.cards.get(id) === card) {
        this.cards.delete(id);
        this.summaryDirty = true;
        this.schedule();
      }
    };
    if (immediate || document.hidden || !card.el.isConnected) {
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

  renderModal(task, now) {
    let item = this.modals.get(task.id);
    if (!item) {
      const root = el('div', 'modal-item');
      root.dataset.id = task.id;
      const ring = createRing();
      const title = el('p', 'modal-title');
      const detail = el('p', 'modal-detail');
      root.append(ring.el, title, detail);
      item = { el: root, ring, title, detail, last: {} };
      this.modals.set(task.id, item);
      this.modalList.append(root);
      this.setOverlay(true);
    }
    const L = item.last;
    write(L, 'title', task.title || task.id, (v) => { item.title.textContent = v; });
    write(L, 'detail', task.detail || '', (v) => {
      item.detail.textContent = v;
      item.detail.hidden = !v;
    });
    write(L, 'state', task.state || 'running', (v) => { item.el.dataset.state = v; });
    const view = ringView(task, now);
    setRing(item.ring, view);
    if (view.active) this.timers.add(task.id);
  }

  dropModal(id) {
    const item = this.modals.get(id);
    if (!item) return;
    item.el.remove();
    this.modals.delete(id);
    if (!this.modals.size) this.setOverlay(false);
  }

  /** Shows or hides the blocking overlay; while shown the page behind is inert. */
  setOverlay(on) {
    if (on === !this.overlay.hidden) return;
    for (const region of this.blockWhileModal) region.inert = on;
    document.body.classList.toggle('modal-open', on);
    if (on) {
      this.restoreFocus = document.activeElement;
      this.overlay.hidden = false;
      this.overlay.focus({ preventScroll: true });
    } else {
      this.overlay.hidden = true;
      const back = this.restoreFocus;
      this.restoreFocus = null;
      if (back && back.isConnected && back.focus) back.focus({ preventScroll: true });
    }
  }

  announce() {
    const list = this.announcements.splice(0);
    const text = list.length > 3 ? `${list.slice(0, 3).join('. ')}. And ${list.length - 3} more.` : list.join('. ');
    this.announcer.textContent = text;
  }

  /** Overall figures for the header, the title and the favicon. */
  summarize(now) {
    let running = 0;
    let done = 0;
    let failed = 0;
    let sum = 0;
    let counted = 0;
    let shown = 0;
    for (const task of this.store.tasks.values()) {
      if (!isShown(task, now)) continue;
      shown++;
      // A parent's progress already holds its children's.
      if (task.parent && this.store.tasks.has(task.parent)) continue;
      const state = task.state || 'running';
      if (state === 'done') done++;
      else if (state === 'failed') failed++;
      if (TERMINAL.has(state)) continue;
      if (state === 'running' || state === 'stalled') running++;
      if (task.progress != null) {
        sum += Math.min(1, Math.max(0, task.progress));
        counted++;
      }
    }
    let visibleCards = 0;
    for (const card of this.cards.values()) if (!card.leaving) visibleCards++;
    if (this.empty) this.empty.hidden = !this.store.everSynced || visibleCards > 0 || this.modals.size > 0;
    this.onSummary({ running, done, failed, shown, pct: counted ? Math.floor((sum / counted) * 100) : null });
  }
}
