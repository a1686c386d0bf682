// Renders the store into the page: task cards in two sections (the live grid, and "Recent" for
// finished work, collapsed by default), children inside their parent, the search filter, rate
// sparklines, the modal overlay and the live-region announcements.
//
// Cost stays with what is on screen: a task is rendered at most once per animation frame however
// many events arrive; only attributes or text that changed are written; cards in chunks the
// browser skips (content-visibility, see sections.js) or in the collapsed Recent section are
// brought up to date in idle time, and at once when they come into view. Countdown rings are
// advanced every frame from the timer's end time while on screen.
//
// Where a card goes: inside its parent's card when the parent is on the page; else in Recent when
// it is done, failed or cancelled and nothing under it still runs (a finished parent with a
// running child stays in the grid; a finished child of a running parent stays inside it); else
// in the live grid. A task seen finishing stays in place for FOLD_AFTER_MS first.

import { createRing, setRing, ringView, stateLabel } from './ring.js';
import { formatDuration, formatRate, formatUnits } from './format.js';
import { isShown } from './store.js';
import { Section, isRendered } from './sections.js';
import { RateHistory, createSpark, drawSpark, sparkPaths } from './spark.js';
import { createCard, el, write } from './card.js';
import { matches, searchTerms } from './search.js';
import { offeredActions, requestLabel, sendRequest, setButtons } from './controls.js';
import { LogView } from './tail.js';

const TERMINAL = new Set(['done', 'failed', 'cancelled']);
const LEAVE_FALLBACK_MS = 700;
const FOLD_AFTER_MS = 4000;
const SPARK_EVERY_MS = 1000; // a sparkline is redrawn at most this often…
const SPARK_EVERY_REDUCED_MS = 5000; // …and more rarely under prefers-reduced-motion
const IDLE_SLICE_MS = 4; // off-screen catch-up work per idle callback when the page is busy
const CATCH_UP_EVERY_MS = 1000; // a pass over the off-screen cards starts at most this often
const MAX_DEPTH = 32; // parent chains are followed this far (guards against cycles)

const stateOf = (task) => (task && task.state) || 'running';

export class Dashboard {
  /**
   * @param {object} o
   * @param {import('./store.js').Store} o.store
   * @param {HTMLElement} o.root       holds both sections (clicks and keys on cards)
   * @param {HTMLElement} o.live       the live grid's chunks go here
   * @param {HTMLDetailsElement} o.recent  the Recent disclosure
   * @param {HTMLElement} o.recentBox  Recent's chunks go here
   * @param {HTMLElement} o.note       one line: nothing matches the search, or nothing runs
   */
  constructor({ store, root, live, recent, recentBox, note, empty, overlay, modalList, announcer, blockWhileModal, onSummary }) {
    this.store = store;
    this.root = root;
    this.empty = empty;
    this.note = note;
    this.overlay = overlay;
    this.modalList = modalList;
    this.announcer = announcer;
    this.blockWhileModal = blockWhileModal || [];
    this.onSummary = onSummary || (() => {});
    const onShown = (chunk) => this.shown(chunk);
    this.live = new Section(live, { name: 'live', onShown });
    this.recent = new Section(recentBox, { name: 'recent', onShown });
    this.recentDetails = recent;
    this.recent.setVisible(recent.open);
    recent.addEventListener('toggle', () => {
      this.recent.setVisible(recent.open);
      if (recent.open) this.shown(recentBox);
    });
    /** id -> card (see card.js) */
    this.cards = new Map();
    this.made = 0;
    this.modals = new Map();
    this.children = new Map(); // parent id -> Set of child ids
    this.dirty = new Set();
    this.stale = new Set(); // ids whose card is off screen and behind the store
    this.catching = new Set(); // the catch-up pass under way: what was stale when it began
    this.timers = new Set(); // ids whose countdown moves by itself
    // Spinners whose ETA comes from their kind's past runs: it is time, so it counts down here
    // between the server's updates, redrawn once a second while on screen.
    this.etaClocks = new Set();
    setInterval(() => {
      for (const id of this.etaClocks) {
        const card = this.cards.get(id);
        if (card && this.store.tasks.has(id) && !card.leaving) {
          if (isRendered(card.el)) this.mark(id);
        } else {
          this.etaClocks.delete(id);
        }
      }
    }, 1000);
    this.hideTimers = new Map(); // id -> {at, handle}
    this.foldAt = new Map(); // id -> performance.now() when a task seen finishing may fold
    this.rates = new RateHistory();
    this.sparkWait = new Set();
    this.sparkTimer = 0;
    this.terms = [];
    this.announcements = [];
    this.summaryDirty = true;
    this.last = {}; // what summarize() wrote last
    this.frame = 0;
    this.idleHandle = 0;
    this.idleWait = 0; // a timer until the next catch-up pass may start
    this.idleNotBefore = 0;
    this.restoreFocus = null;
    this.reducedMotion = matchMedia('(prefers-reduced-motion: reduce)');
    this.flush = this.flush.bind(this);
    this.idle = this.idle.bind(this);
    store.subscribe((c) => this.onChange(c));
    root.addEventListener('click', (e) => this.toggleFromEvent(e));
    root.addEventListener('keydown', (e) => {
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

  /** Shows only the cards whose id or title holds every word of `query` (with their family). */
  setQuery(query) {
    const terms = searchTerms(query);
    if (terms.join(' ') === this.terms.join(' ')) return;
    this.terms = terms;
    this.query = query.trim();
    for (const id of this.cards.keys()) this.dirty.add(id);
    this.summaryDirty = true;
    this.schedule();
  }

  onChange(c) {
    if (c.type === 'task') {
      const { task, prev, id } = c;
      if ((prev && prev.parent) !== task.parent) {
        if (prev && prev.parent) {
          this.unlinkChild(prev.parent, id);
          this.markAncestors(prev.parent);
        }
        if (task.parent) this.linkChild(task.parent, id);
      }
      const state = stateOf(task);
      const was = prev ? stateOf(prev) : null;
      if (TERMINAL.has(state)) {
        this.rates.delete(id);
        // Seen finishing (live, or in a resync after the first snapshot): stay in place a
        // moment, then fold into Recent.
        if ((c.source === 'live' || this.store.everSynced) && (was == null || !TERMINAL.has(was))) {
          this.foldAt.set(id, performance.now() + FOLD_AFTER_MS);
          setTimeout(() => this.mark(id), FOLD_AFTER_MS + 20);
        }
      } else {
        this.foldAt.delete(id);
        if (state === 'running' && !task.timer) this.rates.record(id, task.rate, task.updatedAt ?? this.store.serverNow());
      }
      if (c.source === 'live' && prev && was !== state && (state === 'done' || state === 'failed')) {
        this.announcements.push(`${task.title || id} ${state === 'done' ? 'is done' : 'failed'}`);
      }
      if (task.parent) this.markAncestors(task.parent);
      this.mark(id);
    } else if (c.type === 'remove') {
      this.rates.delete(c.id);
      this.foldAt.delete(c.id);
      if (c.prev && c.prev.parent) {
        this.unlinkChild(c.prev.parent, c.id);
        this.markAncestors(c.prev.parent);
      }
      if (c.immediate) this.drop(c.id, true);
      this.mark(c.id);
    } else if (c.type === 'synced') {
      this.summaryDirty = true;
      this.schedule();
    } else if (c.type === 'log') {
      const card = this.cards.get(c.id);
      if (card && card.logView) card.logView.append(c.from, c.lines);
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

  /** A change below a parent can move it (fold, unfold, filter): re-render the whole chain. */
  markAncestors(id) {
    for (let n = 0; id && n < MAX_DEPTH; n++) {
      this.mark(id);
      const t = this.store.tasks.get(id);
      id = t && t.parent;
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

  /** A chunk (or the Recent section) is on screen again: bring its cards up to date now. */
  shown(box) {
    for (const card of box.querySelectorAll('.task')) this.mark(card.dataset.id);
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
      const modal = this.modals.get(id);
      const card = modal || this.cards.get(id);
      const task = this.store.tasks.get(id);
      // Off screen the countdown stands still; it is redrawn when its chunk is shown again.
      if (!card || !task || card.leaving || (!modal && !isRendered(card.el))) {
        this.timers.delete(id);
        continue;
      }
      const view = ringView(task, now);
      setRing(card.ring, view);
      if (!view.active) this.timers.delete(id);
    }
    if (this.announcements.length) this.announce();
    // What the page shows is current up to this seq (for tools and tests that wait for it).
    write(this.last, 'seq', this.store.seq, (v) => { document.body.dataset.seq = String(v); });
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
    const fresh = !card;
    if (fresh) {
      card = createCard(task, ++this.made);
      this.cards.set(id, card);
      // Children that arrived first move inside.
      const kids = this.children.get(id);
      if (kids) for (const kid of kids) this.dirty.add(kid);
    } else if (card.leaving) {
      this.keep(card);
    }
    this.place(card, task, fresh);
    if (!fresh && !isRendered(card.el)) {
      if (!this.catching.has(id)) this.stale.add(id);
      this.scheduleIdle();
      return;
    }
    this.stale.delete(id);
    this.catching.delete(id);
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

  /** Puts a card in its parent's card when the parent is on the page, else in its section. */
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
        this.syncParent(from);
        this.syncParent(parent.childBox);
      }
      card.el.hidden = !this.passesFilter(task);
      return;
    }
    // Top level: not a child any more (a filtered-out child was hidden; here the section decides).
    if (card.el.hidden || card.el.classList.contains('child')) {
      card.el.classList.remove('child');
      card.el.hidden = false;
    }
    let target = null;
    if (this.passesFilter(task)) target = this.folds(task) ? this.recent : this.live;
    if (card.section === target && (target || !from)) return;
    const folding = card.section === this.live && target === this.recent;
    if (card.section) card.section.remove(card);
    else if (from) card.el.remove();
    this.syncParent(from);
    if (target) target.insert(card, target === this.recent ? -(task.updatedAt || 0) : card.no, fresh || folding);
    this.summaryDirty = true;
  }

  /** Whether a task goes to Recent: finished, not just seen finishing, nothing under it running. */
  folds(task) {
    if (!TERMINAL.has(stateOf(task))) return false;
    const at = this.foldAt.get(task.id);
    if (at != null) {
      if (at > performance.now()) return false;
      this.foldAt.delete(task.id);
    }
    return !this.runsBelow(task.id, 0);
  }

  runsBelow(id, depth) {
    const kids = this.children.get(id);
    if (!kids || depth > MAX_DEPTH) return false;
    for (const k of kids) {
      const t = this.store.tasks.get(k);
      if (!t || t.visible === false) continue;
      if (!TERMINAL.has(stateOf(t)) || this.runsBelow(k, depth + 1)) return true;
    }
    return false;
  }

  /** With a search: the task matches, or a task above or below it does (families stay together). */
  passesFilter(task) {
    const terms = this.terms;
    if (!terms.length || matches(task, terms) || this.matchesBelow(task.id, 0)) return true;
    let t = task;
    for (let n = 0; t && t.parent && n < MAX_DEPTH; n++) {
      t = this.store.tasks.get(t.parent);
      if (t && matches(t, terms)) return true;
    }
    return false;
  }

  matchesBelow(id, depth) {
    const kids = this.children.get(id);
    if (!kids || depth > MAX_DEPTH) return false;
    for (const k of kids) {
      const t = this.store.tasks.get(k);
      if (t && (matches(t, this.terms) || this.matchesBelow(k, depth + 1))) return true;
    }
    return false;
  }

  /** Marks the card owning a children box while it holds any (it then spans two grid rows). */
  syncParent(box) {
    if (!box || !box.classList || !box.classList.contains('children')) return;
    box.parentNode.classList.toggle('parent', box.childElementCount > 0);
  }

  updateCard(card, task, now, background = false) {
    const L = card.last;
    const root = card.el;
    const state = stateOf(task);
    write(L, 'state', state, (v) => { root.dataset.state = v; });
    write(L, 'title', task.title || task.id, (v) => { card.title.textContent = v; });
    const detail = task.detail || '';
    write(L, 'detail', detail, (v) => {
      card.detail.textContent = v;
      card.detail.hidden = !v;
    });
    const running = state === 'running';
    const units = formatUnits(task);
    const rate = running ? formatRate(task) : '';
    // An indeterminate task has an ETA too when its kind's past runs give one: the time it
    // usually takes less the time it has run, so it counts down from the server's last word.
    const spinnerEta = running && task.progress == null && task.eta != null;
    const left = spinnerEta ? task.eta - Math.max(0, now - (task.updatedAt || now)) / 1000 : task.eta;
    const eta = running && left != null && (!spinnerEta || left > 0) && (task.progress == null || task.progress < 1) ? `ETA ${formatDuration(left)}` : '';
    if (spinnerEta && !background) this.etaClocks.add(task.id);
    else this.etaClocks.delete(task.id);
    const usual = running ? usualText(task) : '';
    write(L, 'units', units, (v) => { card.units.textContent = v; });
    write(L, 'rate', rate, (v) => { card.rate.textContent = v; });
    write(L, 'eta', eta, (v) => { card.eta.textContent = v; });
    write(L, 'usual', usual, (v) => { card.usual.textContent = v; });
    write(L, 'slow', running && task.slow === true, (v) => { card.usual.classList.toggle('slow', v); });
    write(L, 'meta', !(units || rate || eta || usual), (v) => { card.meta.hidden = v; });
    // While a cancel or pause request waits for the publisher, the badge says so.
    const request = requestLabel(task);
    write(L, 'badge', request || (running ? '' : stateLabel(task.state)), (v) => {
      card.badge.textContent = v;
      card.badge.hidden = !v;
    });
    write(L, 'request', request ? (task.cancelRequested ? 'cancel' : 'pause') : '', (v) => {
      if (v) root.dataset.request = v;
      else delete root.dataset.request;
    });
    const actions = offeredActions(task);
    write(L, 'actions', actions.join(','), () => setButtons(card.actions, actions, task.title || task.id));
    if (L.expanded) this.followLog(card, task);
    write(L, 'kids', this.childSummary(task.id), (v) => {
      card.kids.textContent = v;
      card.kids.hidden = !v;
    });
    if (L.expanded) {
      write(L, 'updated', task.updatedAt ? new Date(task.updatedAt).toLocaleTimeString() : '', (v) => { card.moreUpdated.textContent = v; });
    }
    if (!background) this.updateSpark(card, running && !task.timer);
    const view = ringView(task, now);
    setRing(card.ring, view);
    if (view.active && !background) this.timers.add(task.id);
    else this.timers.delete(task.id);
  }

  /** Redraws the card's sparkline when its samples changed, at most once per SPARK_EVERY_MS. */
  updateSpark(card, wanted) {
    const version = wanted ? this.rates.version(card.id) : -1;
    if (version === card.sparkVersion) return;
    const t = performance.now();
    const every = this.reducedMotion.matches ? SPARK_EVERY_REDUCED_MS : SPARK_EVERY_MS;
    if (version >= 0 && card.sparkDrawn && t - card.sparkAt < every) {
      this.sparkLater(card.id, every - (t - card.sparkAt));
      return;
    }
    card.sparkVersion = version;
    const paths = version >= 0 ? sparkPaths(this.rates.history(card.id)) : null;
    card.sparkDrawn = !!paths;
    if (paths) {
      if (!card.spark) {
        card.spark = createSpark();
        card.head.append(card.spark.el);
      }
      drawSpark(card.spark, paths);
      card.sparkAt = t;
    }
    if (card.spark) write(card.last, 'spark', !!paths, (on) => { card.spark.el.classList.toggle('off', !on); });
  }

  sparkLater(id, delay) {
    this.sparkWait.add(id);
    if (this.sparkTimer) return;
    this.sparkTimer = setTimeout(() => {
      this.sparkTimer = 0;
      const ids = [...this.sparkWait];
      this.sparkWait.clear();
      for (const w of ids) this.mark(w);
    }, Math.max(16, delay));
  }

  /**
   * Off-screen cards catch up in idle time (so assistive technology reads current values), in
   * passes over what was stale when the pass began, started at most once per CATCH_UP_EVERY_MS:
   * a card updated ten times a second is written about once a second while nobody sees it, not
   * ten times (and at once when it is shown).
   */
  scheduleIdle() {
    if (this.idleHandle || this.idleWait) return;
    if (!this.catching.size) {
      if (!this.stale.size) return;
      const wait = this.idleNotBefore - performance.now();
      if (wait > 0) {
        this.idleWait = setTimeout(() => {
          this.idleWait = 0;
          this.scheduleIdle();
        }, wait);
        return;
      }
      [this.catching, this.stale] = [this.stale, this.catching];
    }
    const ric = window.requestIdleCallback
      || ((cb) => setTimeout(() => cb({ didTimeout: true, timeRemaining: () => 0 }), 250));
    this.idleHandle = ric(this.idle, { timeout: 1000 });
  }

  idle(deadline) {
    this.idleHandle = 0;
    const start = performance.now();
    const now = this.store.serverNow();
    for (const id of this.catching) {
      if (deadline.timeRemaining() < 1 && performance.now() - start > IDLE_SLICE_MS) break;
      this.catching.delete(id);
      const card = this.cards.get(id);
      const task = this.store.tasks.get(id);
      if (card && task && !card.leaving) this.updateCard(card, task, now, true);
    }
    // A pass that finished waits before the next begins; one cut short goes on in the next idle time.
    if (!this.catching.size) this.idleNotBefore = performance.now() + CATCH_UP_EVERY_MS;
    this.scheduleIdle();
  }

  childSummary(id) {
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

  /** An expanded card with log lines shows their tail, and follows it. */
  followLog(card, task) {
    const count = task.logCount || 0;
    if (!count) return;
    if (!card.logView) {
      card.logView = new LogView(card.logBox, card.id);
      card.logView.load();
    } else {
      card.logView.catchUp(count);
    }
  }

  /** A click on one of a card's buttons sends its request; the card's own click toggles it. */
  actionFromEvent(e) {
    const button = e.target.closest('button[data-action]');
    const root = button && button.closest('.task');
    if (!button || !root || button.disabled) return;
    const card = this.cards.get(root.dataset.id);
    if (!card) return;
    button.disabled = true;
    sendRequest(card.id, button.dataset.action).then((problem) => {
      button.disabled = false;
      card.actionNote.textContent = problem;
      card.actionNote.hidden = !problem;
      if (problem) console.warn(`ringcast: ${button.dataset.action} ${card.id}: ${problem}`);
    });
  }

  toggleFromEvent(e) {
    const root = e.target.closest && e.target.closest('.task');
    if (!root) return;
    // A button asks; the log box is for reading (and selecting): neither folds the card.
    const inner = e.target.closest('button, .log');
    if (inner && root.contains(inner) && inner.closest('.task') === root) {
      if (inner.matches('button')) this.actionFromEvent(e);
      return;
    }
    const card = this.cards.get(root.dataset.id);
    if (!card || card.leaving) return;
    const open = !card.last.expanded;
    card.last.expanded = open;
    card.more.hidden = !open;
    root.dataset.expanded = String(open);
    const task = this.store.tasks.get(card.id);
    if (open && task) card.moreUpdated.textContent = task.updatedAt ? new Date(task.updatedAt).toLocaleTimeString() : '';
    if (open && task) this.followLog(card, task);
    if (!open && card.logView) {
      card.logView.close();
      card.logView = null;
    }
  }

  /** Brings a task's card into view and focus (from a notification click). */
  reveal(id) {
    const card = this.cards.get(id);
    if (!card || !card.el.isConnected) return;
    if (card.section === this.recent) this.recentDetails.open = true;
    card.el.scrollIntoView({ block: 'center' });
    card.el.focus({ preventScroll: true });
  }

  /** Animates a card out, then removes it; `immediate` removes it now. */
  drop(id, immediate) {
    const card = this.cards.get(id);
    if (!card) return;
    if (card.leaving && !immediate) return;
    // Children go back to a section rather than leave with their parent.
    if (card.childBox) {
      for (const kid of [...card.childBox.children]) {
        kid.remove();
        kid.classList.remove('child');
        this.dirty.add(kid.dataset.id);
      }
      this.syncParent(card.childBox);
      this.schedule();
    }
    const finish = () => {
      clearTimeout(card.leaveTimer);
      const box = card.el.parentNode;
      if (card.section) card.section.remove(card);
      else card.el.remove();
      this.syncParent(box);
      if (card.logView) {
        card.logView.close();
        card.logView = null;
      }
      if (this.cards.get(id) === card) {
        this.cards.delete(id);
        this.stale.delete(id);
        this.catching.delete(id);
        this.summaryDirty = true;
        this.schedule();
      }
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
    write(L, 'state', stateOf(task), (v) => { item.el.dataset.state = v; });
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

  /** Overall figures for the header, the title and the favicon; Recent's count; the empty states. */
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
      const state = stateOf(task);
      if (state === 'done') done++;
      else if (state === 'failed') failed++;
      if (TERMINAL.has(state)) continue;
      if (state === 'running' || state === 'stalled') running++;
      if (task.progress != null) {
        sum += Math.min(1, Math.max(0, task.progress));
        counted++;
      }
    }
    let cards = 0;
    let topLevel = 0;
    for (const card of this.cards.values()) {
      if (card.leaving) continue;
      cards++;
      if (!card.el.classList.contains('child')) topLevel++;
    }
    let recentFailed = 0;
    for (const card of this.recent.items) if (stateOf(this.store.tasks.get(card.id)) === 'failed') recentFailed++;
    const matching = this.live.size + this.recent.size;
    this.recentDetails.hidden = this.recent.size === 0;
    write(this.last, 'recent', `${this.recent.size}/${recentFailed}`, () => {
      const summary = this.recentDetails.querySelector('.recent-count');
      summary.textContent = String(this.recent.size);
      const f = this.recentDetails.querySelector('.recent-failed');
      f.textContent = recentFailed ? `${recentFailed} failed` : '';
      f.hidden = !recentFailed;
    });
    const nothing = !this.store.everSynced || cards > 0 || this.modals.size > 0;
    if (this.empty) this.empty.hidden = nothing;
    let note = '';
    if (this.terms.length && matching === 0 && cards > 0) note = `No task matches “${this.query}”.`;
    else if (this.live.size === 0 && this.recent.size > 0) note = 'Nothing running right now. Finished tasks are under Recent.';
    write(this.last, 'note', note, (v) => {
      this.note.textContent = v;
      this.note.hidden = !v;
    });
    this.onSummary({
      running, done, failed, shown, pct: counted ? Math.floor((sum / counted) * 100) : null,
      filtered: this.terms.length > 0, matching, topLevel,
    });
  }
}

/** "usually 3 min" from the task's kind's past runs; "slower than usual · usually 3 min" once it is past their 90th percentile. */
export function usualText(task) {
  if (!(task.expectedSeconds > 0)) return task.slow ? 'slower than usual' : '';
  const usual = `usually ${formatDuration(task.expectedSeconds)}`;
  return task.slow ? `slower than usual · ${usual}` : usual;
}
