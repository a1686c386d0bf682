// The face of a task: its ring, title, state badge, detail, and the line of figures under them
// (units · rate · ETA · what its kind usually takes). The dashboard's cards and the embeddable
// widget both show a task through this module, so they say the same thing for the same task.
//
// `faceText` decides what the face says (no DOM); `createFace` builds its elements once;
// `writeFace` writes into them only what changed.

import { createRing, ringView, setRing, stateLabel } from './ring.js';
import { formatDuration, formatRate, formatUnits } from './format.js';
import { requestLabel } from './controls.js';
import { stateOf } from './store.js';
import { el, write } from './dom.js';

/** What the face of `task` says at server time `now` (ms). */
export function faceText(task, now) {
  const state = stateOf(task);
  const running = state === 'running';
  // An indeterminate task has an ETA too when its kind's past runs give one: the time it
  // usually takes less the time it has run, so it counts down from the server's last word.
  const etaCountsDown = running && task.progress == null && task.eta != null;
  const left = etaCountsDown ? task.eta - Math.max(0, now - (task.updatedAt || now)) / 1000 : task.eta;
  const showEta = running && left != null && (!etaCountsDown || left > 0) && (task.progress == null || task.progress < 1);
  // While a cancel or pause request waits for the publisher, the badge says so.
  const request = requestLabel(task);
  return {
    state,
    title: task.title || task.id,
    detail: task.detail || '',
    units: formatUnits(task),
    rate: running ? formatRate(task) : '',
    eta: showEta ? `ETA ${formatDuration(left)}` : '',
    usual: running ? usualText(task) : '',
    slow: running && task.slow === true,
    badge: request || (running ? '' : stateLabel(task.state)),
    request: request ? (task.cancelRequested ? 'cancel' : 'pause') : '',
    /** The ETA moves by itself: whoever shows it redraws it once a second. */
    etaCountsDown,
    ring: ringView(task, now),
  };
}

/** "usually 3 min" from the task's kind's past runs; "slower than usual · usually 3 min" once it is past their 90th percentile. */
export function usualText(task) {
  if (!(task.expectedSeconds > 0)) return task.slow ? 'slower than usual' : '';
  const usual = `usually ${formatDuration(task.expectedSeconds)}`;
  return task.slow ? `slower than usual · ${usual}` : usual;
}

/**
 * The elements of a face. `owner` is the element that carries the task's state (`data-state`,
 * `data-request`, which the stylesheet colours by); the caller places `ring.el` and `info`.
 * `titleTag`: the dashboard's titles are headings; an embedded widget's need not be.
 */
export function createFace(owner, { titleTag = 'h2' } = {}) {
  const ring = createRing();
  const info = el('div', 'info');
  const head = el('div', 'head');
  const title = el(titleTag, 'title');
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
  info.append(head, detail, meta);
  return { owner, ring, info, head, title, badge, detail, meta, units, rate, eta, usual, last: {} };
}

/** Writes `text` (from `faceText`) into a face made by `createFace`, skipping what did not change. */
export function writeFace(face, text) {
  const L = face.last;
  const owner = face.owner;
  write(L, 'state', text.state, (v) => { owner.dataset.state = v; });
  write(L, 'title', text.title, (v) => { face.title.textContent = v; });
  write(L, 'detail', text.detail, (v) => {
    face.detail.textContent = v;
    face.detail.hidden = !v;
  });
  write(L, 'units', text.units, (v) => { face.units.textContent = v; });
  write(L, 'rate', text.rate, (v) => { face.rate.textContent = v; });
  write(L, 'eta', text.eta, (v) => { face.eta.textContent = v; });
  write(L, 'usual', text.usual, (v) => { face.usual.textContent = v; });
  write(L, 'slow', text.slow, (v) => { face.usual.classList.toggle('slow', v); });
  write(L, 'meta', !(text.units || text.rate || text.eta || text.usual), (v) => { face.meta.hidden = v; });
  write(L, 'badge', text.badge, (v) => {
    face.badge.textContent = v;
    face.badge.hidden = !v;
  });
  write(L, 'request', text.request, (v) => {
    if (v) owner.dataset.request = v;
    else delete owner.dataset.request;
  });
  setRing(face.ring, text.ring);
}
