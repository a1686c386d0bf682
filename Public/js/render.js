// The dashboard: keeps a card on the page for every task the store holds that is shown, and
// decides when each is rendered. The jobs around it are modules of their own: where a card goes
// (placement.js, with family.js for parents and children), the search filter (filter.js), what a
// card shows (card.js, face.js), rate sparklines (sparklines.js), off-screen catch-up
// (catch-up.js), the modal overlay (modal.js), screen-reader announcements (announce.js), hideAt
// (hide-timers.js) and the overall figures (summary.js).
//
// Cost stays with what is on screen: a task is rendered at most once per animation frame however
// many events arrive; only attributes or text that changed are written; cards in chunks the
// browser skips (content-visibility, see sections.js) or in the collapsed Recent section are
// brought up to date in idle time, and at once when they come into view. Countdown rings are
// advanced every frame from the timer's end time while on screen, ETAs that count down once a second.

import { ringView, setRing } from './ring.js';
import { TERMINAL, isShown, stateOf } from './store.js';
import { Section, isRendered } from './sections.js';
import { closeLog, createCard, updateCard } from './card.js';
import { bindCardInput } from './card-input.js';
import { faceText } from './face.js';
import { Family } from './family.js';
import { Filter } from './filter.js';
import { Placement } from './placement.js';
import { Sparklines } from './sparklines.js';
import { IdleCatchUp } from './catch-up.js';
import { ModalOverlay } from './modal.js';
import { Announcer, finishNews } from './announce.js';
import { HideTimers } from './hide-timers.js';
import { Summary } from './summary.js';
import { write } from './dom.js';

export class Dashboard {
  /**
   * @param {object} o
   * @param {import('./store.js').Store} o.store
   * @param {HTMLElement} o.root       holds both sections (clicks and keys on cards)
   * @param {HTMLElement} o.live       the live grid's chunks go here
   * @param {HTMLDetailsElement} o.recent  the Recent disclosure
   * @param {HTMLElement} o.recentBox  Recent's chunks go here
   * @param {HTMLElement} o.note       one line: nothing matches the search, or nothing runs
   * @param {HTMLElement} o.empty      shown while there is nothing to show
   * @param {HTMLElement} o.overlay    the modal overlay; o.modalList its list of tasks
   * @param {HTMLElement} o.announcer  the polite live region
   * @param {HTMLElement[]} o.blockWhileModal  made inert while the overlay is up
   * @param {(figures: object) => void} o.onSummary  the overall figures changed (summary.js)
   */
  constructor({ store, root, live, recent, recentBox, note, empty, overlay, modalList, announcer, blockWhileModal, onSummary }) {
    this.store = store;
    const onShown = (chunk) => this.shown(chunk);
    this.live = new Section(live, { name: 'live', onShown });
    this.recent = new Section(recentBox, { name: 'recent', onShown });
    this.recent.setVisible(recent.open);
    recent.addEventListener('toggle', () => {
      this.recent.setVisible(recent.open);
      if (recent.open) this.shown(recentBox);
    });
    /** id -> card (see card.js) */
    this.cards = new Map();
    this.made = 0;
    this.dirty = new Set();
    this.moving = new Set(); // ids whose ring moves by itself (countdowns): advanced every frame
    this.ticking = new Set(); // ids whose ETA counts down: redrawn once a second while on screen
    this.frame = 0;
    this.summaryDirty = true;
    this.last = {}; // what flush() wrote last
    const rerender = (id) => this.mark(id);
    this.family = new Family(store);
    this.filter = new Filter(this.family);
    this.placement = new Placement({
      cards: this.cards, family: this.family, filter: this.filter, live: this.live, recent: this.recent,
      recentDetails: recent, rerender, gone: (card) => this.gone(card),
    });
    this.sparklines = new Sparklines(rerender);
    this.catchUp = new IdleCatchUp({
      now: () => store.serverNow(),
      update: (id, now) => {
        const card = this.cards.get(id);
        const task = store.tasks.get(id);
        if (card && task && !card.leaving) this.update(card, task, now, true);
      },
    });
    this.modal = new ModalOverlay({ overlay, list: modalList, blockWhileModal });
    this.announcer = new Announcer(announcer);
    this.hideTimers = new HideTimers(rerender);
    this.summary = new Summary({ recentDetails: recent, empty, note, onSummary });
    setInterval(() => this.tickEtas(), 1000);
    this.flush = this.flush.bind(this);
    store.subscribe((c) => this.onChange(c));
    bindCardInput(root, (id) => this.cards.get(id), (id) => store.tasks.get(id), (id) => this.placement.dismiss(id));
  }

  /** Shows only the cards whose id or title holds every word of `query` (with their family). */
  setQuery(query) {
    if (!this.filter.set(query)) return;
    for (const id of this.cards.keys()) this.dirty.add(id);
    this.summaryDirty = true;
    this.schedule();
  }

  onChange(c) {
    if (c.type === 'task') {
      const { task, prev, id } = c;
      if (prev?.parent !== task.parent) {
        if (prev?.parent) {
          this.family.unlink(prev.parent, id);
          this.markChain(prev.parent);
        }
        if (task.parent) this.family.link(task.parent, id);
      }
      const state = stateOf(task);
      const was = prev ? stateOf(prev) : null;
      if (TERMINAL.has(state)) {
        this.sparklines.forget(id);
        // Seen finishing (live, or in a resync after the first snapshot): stays in place a moment.
        if ((c.source === 'live' || this.store.everSynced) && (was == null || !TERMINAL.has(was))) this.placement.sawFinish(id);
      } else {
        this.placement.forgetFinish(id);
        if (state === 'running' && !task.timer) this.sparklines.record(id, task.rate, task.updatedAt ?? this.store.serverNow());
      }
      this.announcer.add(finishNews(c));
      if (task.parent) this.markChain(task.parent);
      this.mark(id);
    } else if (c.type === 'remove') {
      this.sparklines.forget(c.id);
      this.placement.forgetFinish(c.id);
      if (c.prev?.parent) {
        this.family.unlink(c.prev.parent, c.id);
        this.markChain(c.prev.parent);
      }
      if (c.immediate) this.drop(c.id, true);
      this.mark(c.id);
    } else if (c.type === 'synced') {
      this.summaryDirty = true;
      this.schedule();
    } else if (c.type === 'log') {
      const card = this.cards.get(c.id);
      if (card?.logView) card.logView.append(c.from, c.lines);
    }
  }

  /** A change below a parent can move it (fold, unfold, filter): re-render the whole chain. */
  markChain(id) {
    this.family.forChain(id, (above) => this.mark(above));
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
    for (const id of this.moving) {
      const item = this.modal.item(id);
      const card = item || this.cards.get(id);
      const task = this.store.tasks.get(id);
      // Off screen the countdown stands still; it is redrawn when its chunk is shown again.
      if (!card || !task || card.leaving || (!item && !isRendered(card.el))) {
        this.moving.delete(id);
        continue;
      }
      const view = ringView(task, now);
      setRing(card.ring, view);
      if (!view.active) this.moving.delete(id);
    }
    this.announcer.flush();
    // What the page shows is current up to this seq (for tools and tests that wait for it).
    write(this.last, 'seq', this.store.seq, (v) => { document.body.dataset.seq = String(v); });
    if (this.summaryDirty) {
      this.summaryDirty = false;
      this.summary.update({
        store: this.store, cards: this.cards, live: this.live, recent: this.recent, modals: this.modal.size, filter: this.filter,
      }, now);
    }
    if (this.moving.size || this.dirty.size) this.schedule();
  }

  render(id, now) {
    const task = this.store.tasks.get(id);
    const shown = isShown(task, now);
    this.hideTimers.watch(id, task, now);
    if (!shown || !task.modal) this.modal.hide(id);
    if (!shown || task.modal) {
      this.drop(id, false);
      if (!shown) {
        this.moving.delete(id);
        return;
      }
    }
    if (task.modal) {
      if (this.modal.show(task, now).active) this.moving.add(id);
      return;
    }
    let card = this.cards.get(id);
    const fresh = !card;
    if (fresh) {
      card = createCard(task, ++this.made);
      this.cards.set(id, card);
      // Children that arrived first move inside.
      const kids = this.family.of(id);
      if (kids) for (const kid of kids) this.dirty.add(kid);
    } else if (card.leaving) {
      this.placement.keep(card);
    }
    if (this.placement.place(card, task, fresh)) this.summaryDirty = true;
    if (!fresh && !isRendered(card.el)) {
      this.catchUp.fellBehind(id);
      return;
    }
    this.catchUp.caughtUp(id);
    this.update(card, task, now, false);
  }

  /** Writes `task` into its card; `background`: the card is off screen (no countdowns, no sparkline). */
  update(card, task, now, background) {
    const text = faceText(task, now, !background);
    const dismissible = !card.el.classList.contains('child') && this.placement.awaitsDismissal(task);
    updateCard(card, task, text, this.family.stepsText(task.id), dismissible);
    // A countdown ETA, an elapsed clock or a quiet publisher's silence moves every second.
    if ((text.etaCountsDown || text.clock || text.state === 'running') && !background) this.ticking.add(task.id);
    else this.ticking.delete(task.id);
    if (!background) this.sparklines.update(card, text.state === 'running' && !task.timer);
    if (text.ring.active && !background) this.moving.add(task.id);
    else this.moving.delete(task.id);
  }

  /** Spinners whose ETA comes from their kind's past runs count it down between the server's updates. */
  tickEtas() {
    for (const id of this.ticking) {
      const card = this.cards.get(id);
      if (card && this.store.tasks.has(id) && !card.leaving) {
        if (isRendered(card.el)) this.mark(id);
      } else {
        this.ticking.delete(id);
      }
    }
  }

  /** Brings a task's card into view and focus (from a notification click). */
  reveal(id) {
    const card = this.cards.get(id);
    if (card) this.placement.reveal(card);
  }

  /** Animates a task's card out, then removes it; `immediate` removes it now. */
  drop(id, immediate) {
    const card = this.cards.get(id);
    if (card) this.placement.drop(card, immediate);
  }

  /** A dropped card has left the page. */
  gone(card) {
    closeLog(card);
    if (this.cards.get(card.id) !== card) return;
    this.cards.delete(card.id);
    this.catchUp.caughtUp(card.id);
    this.summaryDirty = true;
    this.schedule();
  }
}
