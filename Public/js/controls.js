// Cancel, pause and resume buttons: what a task's publisher lets watchers ask of it (the task's
// `controls`). A click POSTs api/tasks/{id}/{action}; the server marks the request on the task
// (the card says "Cancelling…") and carries it to the publisher, whose answer is the new state.

import { TERMINAL, stateOf } from './store.js';
import { mayPublish } from './access.js';

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

/** What the badge says while a request waits for the publisher, or ''. */
export function requestLabel(task) {
  if (TERMINAL.has(task.state)) return '';
  if (task.cancelRequested) return 'Cancelling…';
  if (task.pauseRequested) return 'Pausing…';
  return '';
}

/** Makes the buttons of `box` match `actions` (a list of names), writing only what changed. */
export function setButtons(box, actions, title) {
  const key = actions.join(',');
  if (box.dataset.actions === key) return;
  box.dataset.actions = key;
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
}

/** Sends a request; resolves to an error message, or '' when the server took it. */
export async function sendRequest(id, action) {
  const url = new URL(`api/tasks/${encodeURIComponent(id)}/${action}`, location.href);
  // The sign-in cookie goes with it (same origin): the request is the signed-in grant's.
  try {
    const r = await fetch(url, { method: 'POST' });
    if (r.ok) return '';
    const body = await r.json().catch(() => ({}));
    return body.message || `the server answered ${r.status}`;
  } catch (err) {
    return `the server cannot be reached (${err.message || err})`;
  }
}
