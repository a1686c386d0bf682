// The face of a task: its ring, title, state badge, detail, and the line of figures under them
// (units · rate · ETA · what its kind usually takes). The dashboard's cards and the embeddable
// widget both show a task through this module, so they say the same thing for the same task.
//
// `faceText` decides what the face says (no DOM); `createFace` builds its elements once;
// `writeFace` writes into them only what changed.

import { createRing, ringView, setRing, stateLabel } from './ring.js';
import { formatAgo, formatClock, formatDuration, formatRate, formatUnits } from './format.js';
import { requestLabel } from './controls.js';
import { TERMINAL, stateOf } from './store.js';

/** After this long without an update a running task's ETA is no longer believed: it is greyed and
 *  says how long the publisher has been silent instead. */
export const QUIET_MS = 10000;
import { el, write } from './dom.js';

/** What the face of `task` says at server time `now` (ms). `withClock` false leaves the elapsed
 *  clock out (a card off screen: it is written when the card is shown, not 10 000 times a second). */
export function faceText(task, now, withClock = true) {
  const state = stateOf(task);
  const running = state === 'running';
  // An indeterminate task has an ETA too when its kind's past runs give one: the time it
  // usually takes less the time it has run, so it counts down from the server's last word.
  const etaCountsDown = running && task.progress == null && task.eta != null;
  const left = etaCountsDown ? task.eta - Math.max(0, now - (task.updatedAt || now)) / 1000 : task.eta;
  const showEta = running && left != null && (!etaCountsDown || left > 0) && (task.progress == null || task.progress < 1);
  // While a cancel or pause request waits for the publisher, the badge says so.
  const request = requestLabel(task);
  // Work that waits (a step not started: progress 0, no rate yet) looks queued, not busy.
  const queued = running && task.progress === 0 && !(task.rate > 0) && !task.timer;
  const quietFor = running && !task.timer ? now - (task.updatedAt || now) : 0;
  const quiet = quietFor >= QUIET_MS;
  let eta = showEta ? `ETA ${formatDuration(left)}` : '';
  if (quiet && (eta || task.eta != null)) eta = `no update for ${formatDuration(quietFor / 1000)}`;
  return {
    state,
    title: task.title || task.id,
    detail: task.detail || '',
    units: formatUnits(task),
    rate: running ? formatRate(task) : '',
    eta,
    quiet: quiet && !!eta,
    clock: withClock ? clockText(task, state, now) : '',
    usual: running ? usualText(task) : '',
    slow: running && task.slow === true,
    badge: request.short || (queued ? 'Queued' : running ? '' : stateLabel(task.state)),
    badgeFull: request.full,
    queued,
    request: request.short ? (task.cancelRequested ? 'cancel' : 'pause') : '',
    /** The ETA moves by itself: whoever shows it redraws it once a second. */
    etaCountsDown,
    ring: ringView(task, now),
  };
}

/** "elapsed 1:05" while a task runs (or waits), "took 0:45 · 3 min ago" once it finished; a task
 *  that ended within a second of starting "took under a second" (not "0:00", which reads as no time
 *  measured). */
export function clockText(task, state, now) {
  if (typeof task.startedAt !== 'number' || task.timer) return '';
  if (TERMINAL.has(state)) {
    const end = task.updatedAt || now;
    const took = end - task.startedAt < 1000 ? 'under a second' : formatClock((end - task.startedAt) / 1000);
    return `took ${took} · ${formatAgo((now - end) / 1000)}`;
  }
  return `elapsed ${formatClock(Math.max(0, now - task.startedAt) / 1000)}`;
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
export function createFace(owner, { titleTag = 'h2', roomy = false } = {}) {
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
  // How long it has run, or took ("elapsed 1:05", "took 0:45 · 3 min ago").
  const clock = el('span', 'clock');
  meta.append(units, rate, eta, clock, usual);
  info.append(head, detail, meta);
  return { owner, ring, info, head, title, badge, detail, meta, units, rate, eta, clock, usual, roomy, last: {} };
}

/** Writes `text` (from `faceText`) into a face made by `createFace`, skipping what did not change. */
export function writeFace(face, text) {
  const L = face.last;
  const owner = face.owner;
  write(L, 'state', text.state, (v) => { owner.dataset.state = v; });
  write(L, 'title', text.title, (v) => {
    face.title.textContent = v;
    face.title.title = v; // clipped by the badge or sparkline: the whole title on hover
  });
  write(L, 'detail', text.detail, (v) => {
    face.detail.textContent = v;
    face.detail.hidden = !v;
  });
  write(L, 'units', text.units, (v) => { face.units.textContent = v; });
  write(L, 'rate', text.rate, (v) => { face.rate.textContent = v; });
  write(L, 'eta', text.eta, (v) => { face.eta.textContent = v; });
  write(L, 'usual', text.usual, (v) => { face.usual.textContent = v; });
  write(L, 'quiet', text.quiet, (v) => { face.eta.classList.toggle('quiet', v); });
  write(L, 'clock', text.clock || '', (v) => { face.clock.textContent = v; });
  write(L, 'slow', text.slow, (v) => { face.usual.classList.toggle('slow', v); });
  write(L, 'meta', !(text.units || text.rate || text.eta || text.usual || text.clock), (v) => { face.meta.hidden = v; });
  // A roomy face (the task's page) says a waiting request in full; a card says it short, in full on hover.
  write(L, 'badge', face.roomy && text.badgeFull ? text.badgeFull : text.badge, (v) => {
    face.badge.textContent = v;
    face.badge.hidden = !v;
  });
  write(L, 'badgeFull', text.badgeFull || '', (v) => {
    if (v && v !== face.badge.textContent) face.badge.title = v;
    else face.badge.removeAttribute('title');
  });
  write(L, 'queued', text.queued, (v) => {
    if (v) owner.dataset.queued = 'true';
    else delete owner.dataset.queued;
  });
  write(L, 'request', text.request, (v) => {
    if (v) owner.dataset.request = v;
    else delete owner.dataset.request;
  });
  setRing(face.ring, text.ring);
}
