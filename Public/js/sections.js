// A section of the dashboard (the live grid, or Recent): its top-level cards in display order,
// laid out in chunks of CHUNK cards. Each chunk is a grid with `content-visibility: auto`, so the
// browser skips style, layout and paint of off-screen chunks and tracks ~N/60 elements instead of
// N cards (per-card content-visibility costs an intersection check per card per frame: 20 ms at
// 5 000 cards). The section keeps every chunk but the last full, so the chunks read as one grid.
// It touches only the DOM it owns; the dashboard decides which card goes where.

export const CHUNK = 60; // a multiple of 1…6 columns, so chunk boundaries never leave a gap
const ENTRY_MS = 500; // a card's entry animation (style.css: .34 s) is over by then

/** Orders cards by their key, then by creation (cards have unique `no`). */
function before(a, b) {
  return a.key < b.key || (a.key === b.key && a.no < b.no);
}

export class Section {
  /**
   * @param {HTMLElement} root   the element the chunks go in
   * @param {object} o
   * @param {string} o.name     'live' or 'recent' (data-section of each chunk)
   * @param {(chunk: HTMLElement) => void} o.onShown  a chunk is rendered again (was skipped)
   */
  constructor(root, { name, onShown }) {
    this.root = root;
    this.name = name;
    this.onShown = onShown || (() => {});
    this.items = []; // cards in display order
    this.chunks = [];
    this.visible = true; // false while the section is collapsed
    this.entering = []; // cards whose entry animation plays now
    this.settleTimer = 0;
    // Where the browser tells which content-visibility:auto element it skips, off-screen cards
    // are not kept up to date every frame (render.js); elsewhere every chunk counts as shown.
    this.tracksSkips = 'oncontentvisibilityautostatechange' in root;
  }

  get size() {
    return this.items.length;
  }

  /** Puts `card` in its place by `key` (smaller first); `animate` plays its entry animation. */
  insert(card, key, animate) {
    card.el.classList.toggle('settled', !animate);
    if (animate) this.settleSoon(card.el);
    card.key = key;
    card.section = this;
    const items = this.items;
    const lo = this.place(card);
    items.splice(lo, 0, card);
    let c = Math.floor(lo / CHUNK);
    if (c === this.chunks.length) this.addChunk();
    // The card that was at this index (now lo + 1) is in chunk c: insert before it.
    const next = items[lo + 1];
    this.chunks[c].insertBefore(card.el, next ? next.el : null);
    // Spill: each chunk that now holds one too many passes its last card to the next.
    for (; this.chunks[c].childElementCount > CHUNK; c++) {
      if (c + 1 === this.chunks.length) this.addChunk();
      const last = this.chunks[c].lastElementChild;
      this.chunks[c + 1].prepend(last);
      settle(last);
    }
  }

  /** Takes `card` out of the section. */
  remove(card) {
    const i = this.indexOf(card);
    if (i < 0) return;
    this.items.splice(i, 1);
    card.section = null;
    const chunk = card.el.parentNode;
    card.el.remove();
    // Fill: each chunk from here takes the first card of the next, so only the last is short.
    let c = this.chunks.indexOf(chunk);
    if (c < 0) c = Math.floor(i / CHUNK);
    for (; c + 1 < this.chunks.length; c++) {
      const first = this.chunks[c + 1].firstElementChild;
      if (!first) break;
      this.chunks[c].append(first);
      settle(first);
    }
    while (this.chunks.length && !this.chunks[this.chunks.length - 1].firstElementChild) {
      this.chunks.pop().remove();
    }
  }

  /** The index of the first card that does not come before `card` (binary search). */
  place(card) {
    const items = this.items;
    let lo = 0;
    let hi = items.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (before(items[mid], card)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  indexOf(card) {
    const i = this.place(card);
    return this.items[i] === card ? i : this.items.indexOf(card);
  }

  addChunk() {
    const chunk = document.createElement('div');
    chunk.className = 'grid chunk';
    chunk.dataset.section = this.name;
    chunk.skipped = false;
    chunk.owner = this;
    if (this.tracksSkips) {
      chunk.addEventListener('contentvisibilityautostatechange', (e) => {
        chunk.skipped = e.skipped;
        if (!e.skipped) this.onShown(chunk);
      });
    }
    this.root.append(chunk);
    this.chunks.push(chunk);
    return chunk;
  }

  /** The entry animation plays on arrival only: a card in a skipped chunk never ran it, and
   *  must not run it when first scrolled into view. */
  settleSoon(el) {
    this.entering.push(el);
    if (this.settleTimer) return;
    this.settleTimer = setTimeout(() => {
      this.settleTimer = 0;
      for (const e of this.entering.splice(0)) settle(e);
    }, ENTRY_MS);
  }

  setVisible(on) {
    this.visible = on;
  }
}

/** A card moved between chunks stays where the eye has it: no entry animation again. */
function settle(el) {
  el.classList.add('settled');
}

/** Whether what is inside `el` is rendered now (not in a skipped chunk or a collapsed section). */
export function isRendered(el) {
  const chunk = el.parentNode?.owner ? el.parentNode : el.closest('.chunk');
  return !!chunk && !chunk.skipped && chunk.owner.visible;
}
