// A kind's past runs as a small SVG bar chart: one bar per run (oldest first), the median and the
// 90th percentile as lines across, and this run's elapsed time as a line of its own. Drawn here,
// no library; the numbers are also said in the chart's title and description for screen readers.

import { formatClock } from './format.js';

const SVG_NS = 'http://www.w3.org/2000/svg';
const W = 320;
const H = 132;
const PAD = { left: 8, right: 8, top: 10, bottom: 22 };

function node(tag, attrs, text) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text != null) e.textContent = text;
  return e;
}

/** The median (the mean of the middle two for an even count), as the server takes it. */
export function median(values) {
  const s = [...values].sort((a, b) => a - b);
  if (!s.length) return null;
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** The 90th percentile by nearest rank, as the server takes it. */
export function p90(values) {
  const s = [...values].sort((a, b) => a - b);
  return s.length ? s[Math.ceil(0.9 * s.length) - 1] : null;
}

/**
 * An <svg> of `runs` (seconds each, oldest first) with `med` and `p` marked, and `elapsed` (this
 * run's seconds so far, or null).
 */
export function runsChart(runs, { med = median(runs), p = p90(runs), elapsed = null, kind = '' } = {}) {
  const top = Math.max(...runs, p || 0, med || 0, elapsed || 0) * 1.12 || 1;
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const y = (seconds) => PAD.top + plotH - (seconds / top) * plotH;
  const svg = node('svg', { viewBox: `0 0 ${W} ${H}`, class: 'runs-chart', role: 'img', 'aria-labelledby': 'runs-title runs-desc' });
  const said = `${runs.length} past run${runs.length === 1 ? '' : 's'} of ${kind || 'this kind'}: median ${formatClock(med)}, 90th percentile ${formatClock(p)}`
    + (elapsed != null ? `, this run ${formatClock(elapsed)} so far` : '');
  svg.append(node('title', { id: 'runs-title' }, said), node('desc', { id: 'runs-desc' }, `Runs, oldest first: ${runs.map(formatClock).join(', ')}`));
  const gap = 3;
  const barW = Math.max(2, (plotW - gap * (runs.length - 1)) / Math.max(1, runs.length));
  runs.forEach((seconds, i) => {
    const x = PAD.left + i * (barW + gap);
    const bar = node('rect', {
      class: 'bar', x: x.toFixed(1), y: y(seconds).toFixed(1), width: barW.toFixed(1),
      height: Math.max(1, PAD.top + plotH - y(seconds)).toFixed(1), rx: 2, 'data-seconds': seconds,
    });
    bar.append(node('title', null, formatClock(seconds)));
    svg.append(bar);
  });
  const line = (cls, seconds, label, anchor) => {
    if (seconds == null) return;
    const at = y(seconds).toFixed(1);
    svg.append(node('line', { class: cls, x1: PAD.left, x2: W - PAD.right, y1: at, y2: at, 'data-seconds': seconds }));
    const x = anchor === 'end' ? W - PAD.right : PAD.left;
    svg.append(node('text', { class: `${cls}-label`, x, y: (Number(at) - 3).toFixed(1), 'text-anchor': anchor }, `${label} ${formatClock(seconds)}`));
  };
  line('p90', p, 'p90', 'end');
  line('median', med, 'median', 'start');
  if (elapsed != null) line('this-run', elapsed, 'this run', 'end');
  svg.append(node('line', { class: 'axis', x1: PAD.left, x2: W - PAD.right, y1: PAD.top + plotH, y2: PAD.top + plotH }));
  svg.append(node('text', { class: 'axis-label', x: PAD.left, y: H - 6 }, 'oldest'));
  svg.append(node('text', { class: 'axis-label', x: W - PAD.right, y: H - 6, 'text-anchor': 'end' }, 'newest'));
  return svg;
}

/** The kind a task's runs count for, as the server names it: its `kind`, else its id without a trailing number. */
export function kindOf(task) {
  if (task.kind) return task.kind;
  const id = task.id;
  const stripped = id.replace(/[0-9]+$/, '');
  if (stripped === id) return id;
  const kind = stripped.replace(/[-_.]+$/, '');
  return kind || id;
}
