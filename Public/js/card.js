// A task's card on the dashboard: its face (face.js), the children summary, the buttons, and the
// details and log tail shown while it is expanded. Built once; each update writes only what changed.

import { createFace, writeFace } from './face.js';
import { offeredActions, setButtons } from './controls.js';
import { LogView } from './tail.js';
import { el, safeLink, write } from './dom.js';
import { taskPageURL } from './base.js';

let nextDomId = 0;

/**
 * A card for `task`. `no` orders cards by creation. The sparkline is added when first drawn;
 * the box for children when the first moves in.
 */
export function createCard(task, no) {
  const root = el('article', 'task');
  root.dataset.id = task.id;
  root.tabIndex = 0;
  root.dataset.expanded = 'false';
  const face = createFace(root);
  const titleId = `task-title-${++nextDomId}`;
  face.title.id = titleId;
  root.setAttribute('aria-labelledby', titleId);
  const main = el('div', 'task-main');
  const kids = el('p', 'kids');
  kids.hidden = true;
  // Cancel / pause / resume (js/controls.js), and what a refused request was told.
  const actions = el('div', 'actions');
  actions.hidden = true;
  const actionNote = el('p', 'action-note');
  actionNote.hidden = true;
  actionNote.setAttribute('role', 'status');
  // The task's page (Enter on the focused card goes there too) and the publisher's link, if any.
  // Neither is a Tab stop of its own: a card is one stop, its links a click or Enter away.
  const links = el('p', 'card-links');
  const open = el('a', 'open', 'Open');
  open.href = taskPageURL(task.id);
  open.tabIndex = -1;
  open.setAttribute('aria-label', `Open the page of ${task.title || task.id}`);
  const url = el('a', 'task-url');
  url.rel = 'noopener noreferrer';
  url.tabIndex = -1;
  url.hidden = true;
  // A failure stays in the live grid until someone has seen it (placement.js).
  const dismiss = el('button', 'dismiss', 'Dismiss');
  dismiss.type = 'button';
  dismiss.dataset.action = 'dismiss';
  dismiss.hidden = true;
  dismiss.setAttribute('aria-label', `Dismiss ${task.title || task.id}: move it to Recent`);
  links.append(open, url, dismiss);
  face.info.append(kids, actions, actionNote, links);
  main.append(face.ring.el, face.info);
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
    ...face, id: task.id, no, el: root, kids, more, moreUpdated, actions, actionNote, logBox, logView: null, url, dismiss,
    childBox: null, section: null, key: 0, spark: null, sparkVersion: -1, sparkAt: 0, sparkDrawn: false,
    leaving: false, leaveTimer: 0,
  };
}

/** Brings `card` up to `task`: its face says `text` (face.js), its children line `steps`;
 *  `dismissible`: a failure that waits to be dismissed. */
export function updateCard(card, task, text, steps, dismissible = false) {
  const L = card.last;
  writeFace(card, text);
  const actions = offeredActions(task);
  write(L, 'actions', actions.join(','), () => setButtons(card.actions, actions, text.title));
  write(L, 'dismissible', dismissible, (v) => { card.dismiss.hidden = !v; });
  write(L, 'url', task.url || '', (v) => {
    const link = safeLink(v);
    card.url.hidden = !link;
    if (!link) return;
    card.url.href = link.href;
    card.url.textContent = linkText(link.href);
  });
  if (L.expanded) followLog(card, task);
  write(L, 'kids', steps, (v) => {
    card.kids.textContent = v;
    card.kids.hidden = !v;
  });
  if (L.expanded) write(L, 'updated', updatedText(task), (v) => { card.moreUpdated.textContent = v; });
}

/** Unfolds or folds the card's details (and its log tail). */
export function setExpanded(card, task, open) {
  card.last.expanded = open;
  card.more.hidden = !open;
  card.el.dataset.expanded = String(open);
  if (open && task) {
    card.moreUpdated.textContent = updatedText(task);
    followLog(card, task);
  }
  if (!open) closeLog(card);
}

/** An expanded card with log lines shows their tail, and follows it. */
function followLog(card, task) {
  const count = task.logCount || 0;
  if (!count) return;
  if (!card.logView) {
    card.logView = new LogView(card.logBox, card.id);
    card.logView.load();
  } else {
    card.logView.catchUp(count);
  }
}

export function closeLog(card) {
  if (!card.logView) return;
  card.logView.close();
  card.logView = null;
}

/** A link's host and the end of its path: "ci.example.com/…/42". */
function linkText(url) {
  try {
    const u = new URL(url);
    const tail = u.pathname.split('/').filter(Boolean).pop();
    return tail ? `${u.host}/…/${tail}` : u.host;
  } catch {
    return url;
  }
}

function updatedText(task) {
  return task.updatedAt ? new Date(task.updatedAt).toLocaleTimeString() : '';
}
