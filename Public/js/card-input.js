// What a click or a key on a card does: a click, or Space, folds or unfolds the card's details
// (card.js); Enter opens the task's page; a click on one of its buttons acts (controls.js) and
// says on the card what a refusal was told. Arrow keys move between cards (one Tab stop per
// card). The log box is for reading and selecting: it folds nothing; links go where they point.

import { setExpanded } from './card.js';
import { act } from './controls.js';
import { taskPageURL } from './base.js';

/**
 * @param {HTMLElement} root  holds the cards
 * @param {(id: string) => object|undefined} cardOf  the card (card.js) of a task id
 * @param {(id: string) => object|undefined} taskOf  the task of an id
 * @param {(id: string) => void} dismiss  a failure was seen: it may fold into Recent
 */
export function bindCardInput(root, cardOf, taskOf, dismiss) {
  const toggle = (e) => {
    const cardEl = e.target.closest?.('.task');
    if (!cardEl) return;
    const inner = e.target.closest('button, .log, a');
    if (inner && cardEl.contains(inner) && inner.closest('.task') === cardEl) {
      if (inner.matches('button')) {
        const card = cardOf(cardEl.dataset.id);
        if (card && inner.dataset.action === 'dismiss') {
          dismiss(card.id);
          cardEl.focus({ preventScroll: true });
        } else if (card) {
          act(inner, card.id, card.actionNote, () => taskOf(card.id));
        }
      }
      return;
    }
    const card = cardOf(cardEl.dataset.id);
    if (!card || card.leaving) return;
    setExpanded(card, taskOf(card.id), !card.last.expanded);
  };
  root.addEventListener('click', toggle);
  root.addEventListener('keydown', (e) => {
    const onCard = e.target.classList?.contains('task');
    if (!onCard) return;
    if (e.key === 'Enter') {
      e.preventDefault();
      location.assign(taskPageURL(e.target.dataset.id));
    } else if (e.key === ' ') {
      e.preventDefault();
      toggle(e);
    } else if (['ArrowDown', 'ArrowUp', 'ArrowLeft', 'ArrowRight', 'Home', 'End'].includes(e.key)) {
      const next = neighbour(root, e.target, e.key);
      if (next) {
        e.preventDefault();
        next.focus();
      }
    }
  });
}

/** The card an arrow key goes to: the next or previous one in reading order (children
 *  included), by column for up and down, or the first or last. */
function neighbour(root, from, key) {
  const all = [...root.querySelectorAll('.task:not(.leaving)')].filter((c) => c.getClientRects().length > 0);
  const i = all.indexOf(from);
  if (i < 0) return null;
  if (key === 'Home') return all[0];
  if (key === 'End') return all[all.length - 1];
  if (key === 'ArrowRight') return all[i + 1] || null;
  if (key === 'ArrowLeft') return all[i - 1] || null;
  const here = from.getBoundingClientRect();
  const down = key === 'ArrowDown';
  let best = null;
  let bestScore = Infinity;
  for (const c of all) {
    if (c === from) continue;
    const r = c.getBoundingClientRect();
    const dy = down ? r.top - here.bottom : here.top - r.bottom;
    if (dy < -1) continue;
    const score = dy * 4 + Math.abs(r.left - here.left);
    if (score < bestScore) {
      bestScore = score;
      best = c;
    }
  }
  return best || (down ? all[i + 1] : all[i - 1]) || null;
}
