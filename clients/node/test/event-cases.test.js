// The event field rules of Tests/fixtures/event-cases.json, the file the server's Swift tests and
// the Python client's tests read too: what the client's own checks say of each event, before
// anything is sent, is what the server would answer.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { RingcastError, checkId, logLines, showFields, timerFields, updateFields } from '../src/fields.js';

const FILE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../Tests/fixtures/event-cases.json');
const { cases } = JSON.parse(readFileSync(FILE, 'utf8'));

/** `{"repeat": "x", "times": 3}` stands for "xxx" (a list repeats as a list). */
function expanded(value) {
  if (Array.isArray(value)) return value.map(expanded);
  if (value && typeof value === 'object') {
    const keys = Object.keys(value);
    if (keys.length === 2 && 'repeat' in value && 'times' in value) {
      return Array.isArray(value.repeat) ? Array.from({ length: value.times }, () => value.repeat).flat() : value.repeat.repeat(value.times);
    }
    return Object.fromEntries(keys.map((key) => [key, expanded(value[key])]));
  }
  return value;
}

/** The client's checks of one wire event: throws RingcastError as the server would refuse it. */
function check({ type, id, ...fields }) {
  checkId(id);
  if (type === 'update') updateFields(fields);
  else if (type === 'show') showFields(fields);
  else if (type === 'timer') timerFields(fields);
  else if (type === 'log') {
    const { lines, ...rest } = fields;
    const extra = Object.keys(rest)[0];
    if (extra) throw new RingcastError('unknown_field', `unknown field '${extra}'`, { field: extra });
    if (lines === undefined) throw new RingcastError('missing_field', 'a log needs lines', { field: 'lines' });
    if (!Array.isArray(lines)) throw new RingcastError('invalid_field', 'lines must be a list on the wire', { field: 'lines' });
    logLines(lines);
  } else throw new Error(`the case file names an event type this test does not know: ${type}`);
}

test('the case file holds enough cases to mean something', () => {
  assert.ok(cases.length > 50, `only ${cases.length} cases`);
});

for (const entry of cases) {
  test(`the client answers ${JSON.stringify(entry.event).slice(0, 90)} as the server does`, () => {
    const event = expanded(entry.event);
    if (entry.ok) {
      check(event);
      return;
    }
    assert.throws(
      () => check(event),
      (error) => error instanceof RingcastError && error.error === entry.error && error.field === entry.field,
      `expected ${entry.error} on ${entry.field}`,
    );
  });
}
