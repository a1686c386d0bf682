// The blocking overlay for modal tasks: a ring, title and detail for each task shown as modal,
// the page behind inert while any is shown, keyboard input kept inside (browser shortcuts still
// work), and focus given back to where it was when the last one goes.

import { createRing, ringView, setRing } from './ring.js';
import { stateOf } from './store.js';
import { el, write } from './dom.js';

export class ModalOverlay {
  /**
   * @param {object} o
   * @param {HTMLElement} o.overlay          the dialog (hidden while no task is modal)
   * @param {HTMLElement} o.list             where the tasks' items go
   * @param {HTMLElement[]} o.blockWhileModal  the regions made inert behind the overlay
   */
  constructor({ overlay, list, blockWhileModal }) {
    this.overlay = overlay;
    this.list = list;
    this.blockWhileModal = blockWhileModal || [];
    this.items = new Map(); // id -> {el, ring, title, detail, last}
    this.restoreFocus = null;
    document.addEventListener('keydown', (e) => {
      if (e.ctrlKey || e.metaKey || e.altKey) return;
      if (!this.overlay.hidden && !this.overlay.contains(e.target)) {
        e.preventDefault();
        e.stopPropagation();
        this.overlay.focus();
      }
    }, true);
  }

  get size() {
    return this.items.size;
  }

  /** The item of a modal task, or undefined. */
  item(id) {
    return this.items.get(id);
  }

  /** Shows `task` on the overlay as it is at server time `now`; returns its ring's view. */
  show(task, now) {
    let item = this.items.get(task.id);
    if (!item) {
      const root = el('div', 'modal-item');
      root.dataset.id = task.id;
      const ring = createRing();
      const title = el('p', 'modal-title');
      const detail = el('p', 'modal-detail');
      root.append(ring.el, title, detail);
      item = { el: root, ring, title, detail, last: {} };
      this.items.set(task.id, item);
      this.list.append(root);
      this.setOpen(true);
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
    return view;
  }

  hide(id) {
    const item = this.items.get(id);
    if (!item) return;
    item.el.remove();
    this.items.delete(id);
    if (!this.items.size) this.setOpen(false);
  }

  setOpen(on) {
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
      if (back?.isConnected && back.focus) back.focus({ preventScroll: true });
    }
  }
}
