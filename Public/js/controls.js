// Cancel, pause and resume buttons: what a task's publisher lets watchers ask of it (the task's
// `controls`). A click POSTs api/tasks/{id}/{action}; the server marks the request on the task
// (the card says "Cancelling…") and carries it to the publisher, whose answer is the new state.

import { TERMINAL, stateOf } from './store.js';
import { mayPublish } from './access.js';
import { appURL } from './base.js';

export const ACTIONS = ['cancel', 'pause', 'resume'];
const LABEL = { cancel: 'Cancel', pause: 'Pause', resume: 'Resume' };

/** Which buttons a task shows now, in order: none where the page's grant may not publish it. */
export function offeredActions(task) {
  if (!mayPublish(task.id)) return [];
  const controls = Array.isArray(task.controls) ? task.controls : [];
  const state = stateOf(task);
  if (TERMINAL.has(state) || task.cancelRequested) return [];
  const shown = [];
  if (controls.includes('pause') && state === 'running' && !task.pauseRequested) shown.push('pause');
  if (controls.includes('resume') && (state === 'paused' || task.pauseRequested)) shown.push('resume');
  if (controls.includes('cancel')) shown.push('cancel');
  return shown;
}

/** What the badge says while a request waits for the publisher, or '': `short` for a card, `full`
 *  where there is room (and as the card badge's tooltip). The server says whether any publisher has
 *  the request (`requestWaiting`): one that none has received is not "cancelling", whoever asked. */
export function requestLabel(task) {
  const none = { short: '', full: '' };
  if (TERMINAL.has(task.state)) return none;
  const action = task.cancelRequested ? 'Cancel' : task.pauseRequested ? 'Pause' : '';
  if (!action) return none;
  if (task.requestWaiting) return { short: `${action} waiting`, full: `${action} waiting for its publisher` };
  const going = action === 'Cancel' ? 'Cancelling…' : 'Pausing…';
  return { short: going, full: going };
}

/** Makes the buttons of `box` match `actions` (a list of names), writing only what changed. Focus
 *  on a button that goes stays on the task: the same button if it is still there, else the
 *  focusable element around the box (the card), so a keyboard user is not thrown to the page's top. */
export function setButtons(box, actions, title) {
  const key = actions.join(',');
  if (box.dataset.actions === key) return;
  box.dataset.actions = key;
  const focused = box.contains(document.activeElement) ? document.activeElement.dataset.action : null;
  box.replaceChildren(...actions.map((action) => {
    const b = document.createElement('button');
    b.type = 'button';
    b.className = `action action-${action}`;
    b.dataset.action = action;
    b.textContent = LABEL[action];
    b.setAttribute('aria-label', `${LABEL[action]} ${title}`);
    return b;
  }));
  box.hidden = actions.length === 0;
  if (focused) {
    const same = box.querySelector(`[data-action="${focused}"]`);
    const home = same || box.closest('[tabindex]');
    if (home) home.focus({ preventScroll: true });
  }
}

const CONFIRM_MS = 4000;

/**
 * What a click on an action button does, for a card and for a task's page alike. Cancel asks once
 * ("Confirm cancel", for a few seconds) before it is sent. A cancel no publisher received (the
 * answer's `delivered` is 0) says so in `note`, with a button that withdraws it.
 * @param {HTMLButtonElement} button
 * @param {string} id  the task
 * @param {HTMLElement} note  where a refusal, or a queued cancel, is told
 * @param {() => object|undefined} taskNow  the task as the page holds it now
 */
export function act(button, id, note, taskNow) {
  const action = button.dataset.action;
  if (!action || button.getAttribute('aria-disabled') === 'true') return;
  if (action === 'withdraw') {
    withdraw(button, id, note, taskNow);
    return;
  }
  if (action === 'cancel' && button.dataset.confirm !== 'true') {
    button.dataset.confirm = 'true';
    button.textContent = 'Confirm cancel';
    const label = button.getAttribute('aria-label');
    button.setAttribute('aria-label', `Confirm: ${label}`);
    setTimeout(() => {
      if (button.dataset.confirm !== 'true') return;
      delete button.dataset.confirm;
      button.textContent = LABEL.cancel;
      button.setAttribute('aria-label', label);
    }, CONFIRM_MS);
    return;
  }
  delete button.dataset.confirm;
  // Not `disabled`: a disabled button drops focus to the page, and focus stays on the task.
  button.setAttribute('aria-disabled', 'true');
  sendRequest(id, action).then(({ problem, delivered }) => {
    button.removeAttribute('aria-disabled');
    if (problem) {
      tell(note, problem);
      console.warn(`ringcast: ${action} ${id}: ${problem}`);
    } else if (action === 'cancel' && delivered === 0) {
      tell(note, 'Queued: no publisher connected. It is sent when one connects.', true);
    } else {
      tell(note, '');
    }
  });
}

function tell(note, text, withdrawable = false) {
  note.replaceChildren(text);
  if (withdrawable) {
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'action action-withdraw';
    b.dataset.action = 'withdraw';
    b.textContent = 'Withdraw';
    note.append(' ', b);
  }
  note.hidden = !text;
}

/** Withdraws a waiting cancel: the task's own state, published again, answers every request
 *  waiting on it (docs/PROTOCOL.md, merge rules), so the cancel goes and nothing else changes. */
async function withdraw(button, id, note, taskNow) {
  const task = taskNow() || {};
  button.setAttribute('aria-disabled', 'true');
  const { problem } = await post(`api/tasks/${encodeURIComponent(id)}`, { state: stateOf(task) === 'paused' ? 'paused' : 'running' });
  if (problem) {
    button.removeAttribute('aria-disabled');
    tell(note, `Could not withdraw: ${problem}`);
    return;
  }
  const home = note.closest('[tabindex]');
  tell(note, '');
  if (home) home.focus({ preventScroll: true });
}

async function post(path, body) {
  try {
    const init = { method: 'POST' };
    if (body) {
      init.headers = { 'Content-Type': 'application/json' };
      init.body = JSON.stringify(body);
    }
    const r = await fetch(appURL(path), init);
    if (r.ok) return { answer: await r.json().catch(() => ({})) };
    const answer = await r.json().catch(() => ({}));
    return { problem: answer.message || `the server answered ${r.status}` };
  } catch (err) {
    return { problem: `the server cannot be reached (${err.message || err})` };
  }
}

/** Sends a request; resolves to `{problem}` (a message) or `{delivered}` (publisher sockets told). */
export async function sendRequest(id, action) {
  // The sign-in cookie goes with it (same origin): the request is the signed-in grant's.
  const { problem, answer } = await post(`api/tasks/${encodeURIComponent(id)}/${action}`);
  if (problem) return { problem, delivered: null };
  return { problem: '', delivered: typeof answer.delivered === 'number' ? answer.delivered : null };
}
