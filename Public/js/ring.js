// Progress rings: one SVG component for determinate rings, spinners and countdowns.
// `ringView` turns a task into what the ring shows; `setRing` writes only what changed.

const SVG_NS = 'http://www.w3.org/2000/svg';
// How long a ring eases to a new value (style.css, `.ring .arc`). A ring moved again sooner is
// moved without easing (class `quick`): each update then moves it by itself, and it is repainted
// once per update instead of every frame (60 rings eased without end cost a third of the
// browser's CPU with 5 000 tasks updated ten times a second).
const EASE_MS = 450;

const STATE_LABEL = {
  running: 'Running', paused: 'Paused', done: 'Done', failed: 'Failed',
  cancelled: 'Cancelled', stalled: 'Stalled',
};
const STATE_ICON = { done: '✓', failed: '✕', cancelled: '–', paused: '❚❚', stalled: '?' };

export function stateLabel(state) {
  return STATE_LABEL[state] || state || '';
}

function circle(cls) {
  const c = document.createElementNS(SVG_NS, 'circle');
  c.setAttribute('class', cls);
  c.setAttribute('cx', '50');
  c.setAttribute('cy', '50');
  c.setAttribute('r', '42');
  return c;
}

/** Builds the ring element: a progressbar wrapping an SVG track + arc and the centre text. */
export function createRing() {
  const el = document.createElement('div');
  el.className = 'ring';
  el.setAttribute('role', 'progressbar');
  el.setAttribute('aria-valuemin', '0');
  el.setAttribute('aria-valuemax', '100');
  const svg = document.createElementNS(SVG_NS, 'svg');
  svg.setAttribute('viewBox', '0 0 100 100');
  svg.setAttribute('aria-hidden', 'true');
  svg.setAttribute('focusable', 'false');
  const arc = circle('arc');
  arc.setAttribute('pathLength', '100');
  // Start at 12 o'clock; SVG circles are stroked clockwise on screen.
  arc.setAttribute('transform', 'rotate(-90 50 50)');
  svg.append(circle('track'), arc);
  const value = document.createElement('span');
  value.className = 'value';
  value.setAttribute('aria-hidden', 'true');
  const num = document.createElement('span');
  num.className = 'num';
  const unit = document.createElement('span');
  unit.className = 'unit';
  value.append(num, unit);
  el.append(svg, value);
  return { el, arc, num, unit, last: {} };
}

function setAttr(el, last, key, name, value) {
  if (last[key] === value) return;
  last[key] = value;
  if (value == null) el.removeAttribute(name);
  else el.setAttribute(name, value);
}

function setText(el, last, key, value) {
  if (last[key] === value) return;
  last[key] = value;
  el.textContent = value;
}

/** Applies a view from `ringView` to a ring made by `createRing`, skipping unchanged writes. */
export function setRing(ring, view) {
  const L = ring.last;
  if (L.mode !== view.mode) {
    L.mode = view.mode;
    const cl = ring.el.classList;
    cl.toggle('spinner', view.mode === 'indeterminate');
    cl.toggle('timer', view.mode === 'timer');
    cl.toggle('static', view.mode === 'static');
    ring.num.classList.toggle('remaining', view.mode === 'timer');
    if (view.mode === 'indeterminate') ring.el.setAttribute('aria-busy', 'true');
    else ring.el.removeAttribute('aria-busy');
    if (view.mode === 'indeterminate') {
      ring.arc.style.strokeDashoffset = '';
      L.offset = undefined;
    }
  }
  if (view.mode !== 'indeterminate') {
    const offset = Math.round((100 - clamp01(view.fraction) * 100) * 100) / 100;
    if (L.offset !== offset) {
      L.offset = offset;
      const t = performance.now();
      const quick = L.movedAt !== undefined && t - L.movedAt < EASE_MS;
      L.movedAt = t;
      if (L.quick !== quick) {
        L.quick = quick;
        ring.el.classList.toggle('quick', quick);
      }
      ring.arc.style.strokeDashoffset = String(offset);
    }
  }
  setAttr(ring.el, L, 'now', 'aria-valuenow', view.valuenow == null ? null : String(view.valuenow));
  setAttr(ring.el, L, 'text', 'aria-valuetext', view.valuetext || null);
  setAttr(ring.el, L, 'label', 'aria-label', view.label || null);
  const icon = view.text !== '' && !/^\d/.test(view.text);
  if (L.icon !== icon) {
    L.icon = icon;
    ring.num.classList.toggle('icon', icon);
  }
  setText(ring.num, L, 'num', view.text);
  setText(ring.unit, L, 'unit', view.unit);
}

export function clamp01(x) {
  return x < 0 ? 0 : x > 1 ? 1 : x;
}

/**
 * Seconds left on a timer task at server time `now` (ms): counted from its end time, so it moves
 * smoothly between ticks, but kept within one interval below the last tick's figure (ticks
 * resynchronise it). A paused or stopped timer is read at the moment it stopped.
 */
export function timerRemaining(task, now) {
  const tm = task.timer || {};
  const total = tm.seconds ?? task.total ?? 0;
  if (task.state === 'done') return 0;
  let rem;
  if (tm.endsAt != null) {
    const at = tm.pausedAt ?? (task.state === 'running' ? now : task.updatedAt ?? now);
    rem = (tm.endsAt - at) / 1000;
    if (tm.remaining != null) rem = Math.min(tm.remaining, Math.max(tm.remaining - (tm.interval || 1), rem));
  } else {
    rem = tm.remaining ?? total - (tm.elapsed ?? 0);
  }
  return Math.min(Math.max(rem, 0), total || Infinity);
}

/** What the ring of `task` shows at server time `now` (ms). `active` means it moves on its own. */
export function ringView(task, now) {
  const state = task.state || 'running';
  const title = task.title || task.id;
  if (task.timer) {
    const total = task.timer.seconds ?? task.total ?? 0;
    const rem = timerRemaining(task, now);
    const whole = Math.max(0, Math.ceil(rem - 1e-6));
    const fraction = total > 0 ? 1 - rem / total : 1;
    return {
      mode: 'timer',
      fraction,
      valuenow: Math.round(clamp01(fraction) * 100),
      valuetext: `${whole} second${whole === 1 ? '' : 's'} left${state !== 'running' ? `, ${stateLabel(state).toLowerCase()}` : ''}`,
      label: title,
      // Under a minute in seconds; from a minute on as a clock, 8:43 rather than 523 s.
      text: whole >= 60 ? `${Math.floor(whole / 60)}:${String(whole % 60).padStart(2, '0')}` : String(whole),
      unit: whole >= 60 ? '' : 's',
      active: state === 'running' && task.timer.pausedAt == null && rem > 0,
    };
  }
  if (task.progress == null) {
    if (state === 'running') {
      return { mode: 'indeterminate', fraction: 0, valuenow: null, valuetext: 'In progress', label: title, text: '', unit: '' };
    }
    return {
      mode: 'static',
      fraction: state === 'done' ? 1 : 0,
      valuenow: state === 'done' ? 100 : null,
      valuetext: stateLabel(state),
      label: title,
      text: STATE_ICON[state] || '',
      unit: '',
    };
  }
  const p = clamp01(Number(task.progress) || 0);
  const pct = Math.round(p * 100);
  const done = state === 'done';
  return {
    mode: 'determinate',
    fraction: p,
    valuenow: pct,
    valuetext: `${pct} percent${state !== 'running' ? `, ${stateLabel(state).toLowerCase()}` : ''}`,
    label: title,
    text: done ? '✓' : String(pct),
    unit: done ? '' : '%',
  };
}
