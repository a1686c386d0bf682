// Events as the wire spells them, checked with the server's own rules (docs/PROTOCOL.md, Merge
// rules) before they are queued: a value the server would refuse throws RingcastError at the call,
// with the code, message and field the server would have sent, and nothing is sent.

/**
 * What the server (or the client, checking with the server's rules) refused, or why it could not
 * be reached: `error` is the server's code (or the client's own `timeout`, `closed`,
 * `unreachable`), `message` what was wrong and what to do, `field` the offending field or null,
 * `id` the task the refused event named, `status` the HTTP status when it came over HTTP.
 */
export class RingcastError extends Error {
  constructor(error, message, { field = null, id = null, status = null } = {}) {
    super(message);
    this.name = 'RingcastError';
    this.error = error;
    this.field = field;
    this.id = id;
    this.status = status;
  }

  toString() {
    return `${this.id ? `task ${this.id}: ` : ''}${this.error}: ${this.message}${this.field ? ` (field ${this.field})` : ''}`;
  }

  static fromAnswer(body, status = null) {
    if (body && typeof body === 'object' && typeof body.error === 'string') {
      return new RingcastError(body.error, String(body.message ?? ''), {
        field: typeof body.field === 'string' ? body.field : null,
        id: typeof body.id === 'string' ? body.id : null,
        status,
      });
    }
    return new RingcastError('unexpected_answer', `the server answered HTTP ${status}: ${String(body).slice(0, 300)}`, { status });
  }
}

/** Thrown where the work on a task next reports progress, once the dashboard asked to cancel it. */
export class Cancelled extends Error {
  constructor(id) {
    super(`task ${id} was cancelled from the dashboard`);
    this.name = 'Cancelled';
    this.id = id;
  }
}

const ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const MAX_UNITS = 9007199254740992;
const MAX_SECONDS = 31536000;
export const STATES = ['running', 'paused', 'done', 'failed', 'cancelled'];
export const CONTROLS = ['cancel', 'pause', 'resume'];
export const MAX_LOG_LINES = 10000;

const invalid = (message, field) => new RingcastError('invalid_field', message, { field });

export function checkId(id) {
  if (typeof id !== 'string' || !ID.test(id)) {
    throw new RingcastError(
      'invalid_id',
      `task id '${String(id).slice(0, 140)}' is not valid: 1–128 letters, digits, '.', '_' or '-', starting with a letter or digit`,
      { field: 'id' },
    );
  }
  return id;
}

function number(name, value, low, high, hint, lowOpen = false) {
  if (typeof value !== 'number') throw invalid(`${name} must be a number, not ${typeof value} (${hint})`, name);
  if (Number.isNaN(value) || value < low || value > high || (lowOpen && value <= low)) {
    throw invalid(`${name} ${value} is out of range: ${hint}`, name);
  }
  return value;
}

function text(name, value, limit) {
  if (typeof value !== 'string') throw invalid(`${name} must be a string, not ${typeof value}`, name);
  // Code points, as the server counts.
  if ([...value].length > limit) throw invalid(`${name} is longer than ${limit} characters`, name);
  return value;
}

function flag(name, value) {
  if (typeof value !== 'boolean') throw invalid(`${name} must be true or false, not ${typeof value}`, name);
  return value;
}

const seconds = (name, value) => number(name, value, 0, MAX_SECONDS, 'seconds, above 0', true);
const nullable = (value, check) => (value === null ? null : check(value));

function taskLike(name, value) {
  if (typeof value !== 'string' || !ID.test(value)) throw invalid(`${name} '${String(value).slice(0, 140)}' is not a valid task id`, name);
  return value;
}

const UPDATE = {
  progress: (v) => nullable(v, (x) => number('progress', x, 0, 1, 'send 0.42 for 42%')),
  completed: (v) => nullable(v, (x) => number('completed', x, 0, MAX_UNITS, 'at most 2^53')),
  total: (v) => nullable(v, (x) => number('total', x, 0, MAX_UNITS, 'above 0, at most 2^53', true)),
  title: (v) => text('title', v, 200),
  detail: (v) => nullable(v, (x) => text('detail', x, 1000)),
  state: (v) => {
    if (!STATES.includes(v)) throw invalid(`state '${v}' is not one of ${STATES.join(', ')}`, 'state');
    return v;
  },
  parent: (v) => nullable(v, (x) => taskLike('parent', x)),
  staleAfter: (v) => nullable(v, (x) => seconds('staleAfter', x)),
  visible: (v) => flag('visible', v),
  modal: (v) => flag('modal', v),
  hideAfter: (v) => nullable(v, (x) => seconds('hideAfter', x)),
  kind: (v) => nullable(v, (x) => taskLike('kind', x)),
  abandonAfter: (v) => nullable(v, (x) => seconds('abandonAfter', x)),
};

function checked(fields, rules, what) {
  const result = {};
  for (const [name, value] of Object.entries(fields ?? {})) {
    if (value === undefined) continue;
    const rule = rules[name];
    if (!rule) throw new RingcastError('unknown_field', `unknown field '${name}': ${what} takes ${Object.keys(rules).join(', ')}`, { field: name });
    result[name] = rule(value);
  }
  return result;
}

/** The fields of an update, checked; `controls` is returned apart (it travels as an event of its own). */
export function updateFields(fields) {
  const { controls, ...rest } = fields ?? {};
  return { fields: checked(rest, UPDATE, 'an update'), controls: controls === undefined ? undefined : controlsList(controls) };
}

export function controlsList(value) {
  if (value === null) return [];
  if (!Array.isArray(value)) throw invalid('controls must be a list like ["cancel", "pause"]', 'controls');
  const chosen = [];
  value.forEach((item, index) => {
    if (!CONTROLS.includes(item)) throw invalid(`controls[${index}] is not one of ${CONTROLS.join(', ')}`, 'controls');
    if (!chosen.includes(item)) chosen.push(item);
  });
  return chosen;
}

export function showFields(fields) {
  return checked(fields, { hideAfter: (v) => seconds('hideAfter', v), modal: (v) => flag('modal', v), detail: (v) => text('detail', v, 1000) }, 'show');
}

export function timerFields(fields) {
  const result = checked(
    fields,
    {
      seconds: (v) => seconds('seconds', v),
      interval: (v) => number('interval', v, 0.01, 86400, 'seconds between ticks, at least 0.01'),
      title: (v) => text('title', v, 200),
      hideAfter: (v) => seconds('hideAfter', v),
      startAt: (v) => number('startAt', v, 0, 1e15, 'Unix milliseconds'),
    },
    'a timer',
  );
  if (result.seconds === undefined) {
    throw new RingcastError('missing_field', 'a timer needs "seconds", its length (e.g. {seconds: 180})', { field: 'seconds' });
  }
  return result;
}

/** A string (its lines) or an array of strings, split as the server splits them. */
export function logLines(lines) {
  let items;
  if (typeof lines === 'string') items = [lines.endsWith('\n') ? lines.slice(0, -1) : lines];
  else if (Array.isArray(lines)) items = lines;
  else throw invalid(`lines must be a string or an array of strings, not ${typeof lines}`, 'lines');
  const result = [];
  items.forEach((item, index) => {
    if (typeof item !== 'string') throw invalid(`lines[${index}] must be a string, not ${typeof item}`, 'lines');
    result.push(...item.split('\n'));
  });
  if (result.length === 0) throw new RingcastError('missing_field', 'the log has no lines: send at least one', { field: 'lines' });
  if (result.length > MAX_LOG_LINES) {
    throw new RingcastError('body_too_large', `a log request carries at most ${MAX_LOG_LINES} lines; send ${result.length} in several`, { field: 'lines' });
  }
  return result;
}

/** `text` within the server's 1000 characters for a detail. */
export function clipDetail(value) {
  const points = [...value];
  return points.length <= 1000 ? value : `${points.slice(0, 999).join('')}…`;
}
