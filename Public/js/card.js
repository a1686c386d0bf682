// The DOM of one task card, built once; render.js fills it in and writes only what changed.

import { createRing } from './ring.js';

let nextDomId = 0;

export function el(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text != null) e.textContent = text;
  return e;
}

/** Calls `apply(value)` unless `value` is what was written last under `key` (skips unchanged DOM writes). */
export function write(last, key, value, apply) {
  if (last[key] === value) return;
  last[key] = value;
  apply(value);
}

/**
 * A card for `task`: ring, title, badge, detail, units · rate · ETA, children summary, and the
 * details shown on click. `no` orders cards by creation. The sparkline is added when first drawn.
 */
export function createCard(task, no) {
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
  // What this kind of task usually takes, from its past runs ("usually 3 min", "slower than usual").
  const usual = el('span', 'usual');
  meta.append(units, rate, eta, usual);
  const kids = el('p', 'kids');
  kids.hidden = true;
  // Cancel / pause / resume (js/controls.js), and what a refused request was told.
  const actions = el('div', 'actions');
  actions.hidden = true;
  const actionNote = el('p', 'action-note');
  actionNote.hidden = true;
  actionNote.setAttribute('role', 'status');
  info.append(head, detail, meta, kids, actions, actionNote);
  main.append(ring.el, info);
  const more = el('dl', 'more');
  more.hidden = true;
  const moreId = el('dd', 'more-id', task.id);
  const moreUpdated = el('dd', 'more-updated');
  more.append(el('dt', null, 'id'), moreId, el('dt', null, 'updated'), moreUpdated);
  // The log tail, shown while the card is expanded and the task has lines (js/tail.js).
  const logBox = el('pre', 'log');
  logBox.hidden = true;
  logBox.tabIndex = 0;
  logBox.setAttribute('role', 'log');
  logBox.setAttribute('aria-label', `Output of ${task.title || task.id}`);
  root.append(main, more, logBox);
  return {
    id: task.id, no, el: root, ring, head, title, badge, detail, meta, units, rate, eta, usual, kids, more, moreUpdated,
    actions, actionNote, logBox, logView: null,
    childBox: null, section: null, key: 0, spark: null, sparkVersion: -1, sparkAt: 0, sparkDrawn: false,
    leaving: false, leaveTimer: 0, last: {},
  };
}
