// Sparklines of a task's rate: the `rate` values its events carry, kept per task in a fixed ring
// of time slots (SLOTS × SLOT_MS: the last three minutes; the last value seen in a slot wins, a
// slot without an update is a gap), and drawn as an inline SVG built with DOM calls (no inline
// style, so a strict CSP holds). Memory per task is one Float32Array, whatever the update rate.
// The line spans the width from the task's first sample (so a young task's line is not a sliver
// at the right edge) until it has three minutes of history, then scrolls.

const SVG_NS = 'http://www.w3.org/2000/svg';
export const SLOTS = 90;
export const SLOT_MS = 2000;
const W = 100; // viewBox width
const H = 20; // viewBox height
const PAD = 2; // keeps the stroke inside the box at the top and bottom

/** The rate history of every task, one ring of SLOTS samples each. */
export class RateHistory {
  constructor(slots = SLOTS, slotMs = SLOT_MS) {
    this.slots = slots;
    this.slotMs = slotMs;
    /** id -> {values: Float32Array, head: absolute slot of the newest sample, version} */
    this.rings = new Map();
  }

  /** Records `rate` at server time `t` (ms). Returns true when what a sparkline shows changed. */
  record(id, rate, t) {
    if (typeof rate !== 'number' || !Number.isFinite(rate) || !Number.isFinite(t)) return false;
    const slot = Math.floor(t / this.slotMs);
    let ring = this.rings.get(id);
    if (!ring) {
      ring = { values: new Float32Array(this.slots).fill(NaN), head: slot, version: 0 };
      this.rings.set(id, ring);
    }
    if (slot <= ring.head - this.slots) return false; // older than the window
    if (slot > ring.head) {
      // Slots that passed without an update are gaps.
      if (slot - ring.head >= this.slots) ring.values.fill(NaN);
      else for (let k = ring.head + 1; k < slot; k++) ring.values[k % this.slots] = NaN;
      ring.head = slot;
    }
    const v = Math.max(0, rate);
    const i = slot % this.slots;
    if (ring.values[i] === Math.fround(v)) return false;
    ring.values[i] = v;
    ring.version++;
    return true;
  }

  delete(id) {
    this.rings.delete(id);
  }

  /** The samples of `id` in the window, oldest first (NaN for gaps), or null. */
  samples(id) {
    const ring = this.rings.get(id);
    if (!ring) return null;
    const out = new Array(this.slots);
    for (let k = 0; k < this.slots; k++) out[k] = ring.values[(ring.head + 1 + k) % this.slots];
    return out;
  }

  /** Like samples(), from the first slot that holds one (a young task has fewer). */
  history(id) {
    const all = this.samples(id);
    if (!all) return null;
    let first = 0;
    while (first < all.length && Number.isNaN(all[first])) first++;
    return all.slice(first);
  }

  version(id) {
    const ring = this.rings.get(id);
    return ring ? ring.version : -1;
  }
}

/** The line and the area under it, as SVG path data; null with fewer than two samples. */
export function sparkPaths(samples) {
  if (!samples) return null;
  let max = 0;
  let count = 0;
  for (const v of samples) {
    if (!Number.isNaN(v)) {
      count++;
      if (v > max) max = v;
    }
  }
  if (count < 2) return null;
  const y = (v) => (max > 0 ? Math.round((H - PAD - (v / max) * (H - 2 * PAD)) * 10) / 10 : H - PAD);
  const step = W / (samples.length - 1);
  let line = '';
  let area = '';
  let run = []; // [x, y] of the current stretch without gaps
  const close = () => {
    if (run.length > 1) {
      line += `M${run.map(([x, yy]) => `${x} ${yy}`).join('L')}`;
      area += `M${run[0][0]} ${H}L${run.map(([x, yy]) => `${x} ${yy}`).join('L')}L${run[run.length - 1][0]} ${H}Z`;
    }
    run = [];
  };
  samples.forEach((v, i) => {
    if (!Number.isNaN(v)) run.push([Math.round(i * step * 10) / 10, y(v)]);
    else close();
  });
  close();
  return line ? { line, area } : null;
}

/** The SVG element of a sparkline: an area and a line, hidden from assistive technology. */
export function createSpark() {
  const svg = document.createElementNS(SVG_NS, 'svg');
  svg.setAttribute('class', 'spark');
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  svg.setAttribute('preserveAspectRatio', 'none');
  svg.setAttribute('aria-hidden', 'true');
  svg.setAttribute('focusable', 'false');
  const title = document.createElementNS(SVG_NS, 'title');
  title.textContent = `Rate over the last ${Math.round((SLOTS * SLOT_MS) / 60000)} minutes`;
  const area = document.createElementNS(SVG_NS, 'path');
  area.setAttribute('class', 'spark-area');
  const line = document.createElementNS(SVG_NS, 'path');
  line.setAttribute('class', 'spark-line');
  line.setAttribute('vector-effect', 'non-scaling-stroke');
  svg.append(title, area, line);
  return { el: svg, area, line };
}

/** Writes new paths into a sparkline made by `createSpark`. */
export function drawSpark(spark, paths) {
  spark.line.setAttribute('d', paths.line);
  spark.area.setAttribute('d', paths.area);
}
