// What a click or a key on a card does: a click, Enter or Space folds or unfolds the card's
// details (card.js); a click on one of its buttons sends that request (controls.js) and says
// on the card what a refusal was told. The log box is for reading and selecting: it folds nothing.

import { setExpanded } from './card.js';
import { sendRequest } from './controls.js';

/**
 * @param {HTMLElement} root  holds the cards
 * @param {(id: string) => object|undefined} cardOf  the card (card.js) of a task id
 * @param {(id: string) => object|undefined} taskOf  the task of an id
 */
export function bindCardInput(root, cardOf, taskOf) {
  const toggle = (e) => {
    const cardEl = e.target.closest && e.target.closest('.task');
    if (!cardEl) return;
    const inner = e.target.closest('button, .log');
    if (inner && cardEl.contains(inner) && inner.closest('.task') === cardEl) {
      if (inner.matches('button')) act(inner, cardEl);
      return;
    }
    const card = cardOf(cardEl.dataset.id);
    if (!card || card.leaving) return;
    setExpanded(card, taskOf(card.id), !card.last.expanded);
  };
  const act = (button, cardEl) => {
    if (!button.dataset.action || button.disabled) return;
    const card = cardOf(cardEl.dataset.id);
    if (!card) return;
    button.disabled = true;
    sendRequest(card.id, button.dataset.action).then((problem) => {
      button.disabled = false;
      card.actionNote.textContent = problem;
      card.actionNote.hidden = !problem;
      if (problem) console.warn(`ringcast: ${button.dataset.action} ${card.id}: ${problem}`);
    });
  };
  root.addEventListener('click', toggle);
  root.addEventListener('keydown', (e) => {
    if ((e.key === 'Enter' || e.key === ' ') && e.target.classList.contains('task')) {
      e.preventDefault();
      toggle(e);
    }
  });
}
