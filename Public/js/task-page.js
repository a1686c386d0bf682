// A task's own page (`/tasks/{id}`, Public/task.html): its ring large, its figures, the whole log
// tail (log-panel.js), its timeline (timeline-view.js), its kind's past runs (chart.js), its
// steps as a tree, its controls and the links to copy. Live through one socket narrowed to the
// task and the ids under it (`{id},{id}.*`), with the dashboard's reconnect and resume
// (connection.js, store.js).

import { Connection, pageServer, socketURL, streamURL } from './connection.js';
import { Store, TERMINAL, stateOf } from './store.js';
import { createFace, faceText, writeFace } from './face.js';
import { createRing, ringView, setRing, stateLabel } from './ring.js';
import { act, offeredActions, setButtons } from './controls.js';
import { setGrant } from './access.js';
import { appURL, taskPageURL } from './base.js';
import { LogPanel } from './log-panel.js';
import { TimelineView } from './timeline-view.js';
import { kindOf, runsChart } from './chart.js';
import { formatClock } from './format.js';
import { bindThemeToggle } from './theme.js';
import { el, safeLink, write } from './dom.js';

const $ = (id) => document.getElementById(id);

const id = decodeURIComponent(location.pathname.replace(/^.*\/tasks\//, '').replace(/\/$/, ''));
const store = new Store();
bindThemeToggle($('theme'));

// The hero: the face the cards show, large, and what only the page has room for.
const hero = $('hero');
const face = createFace(hero, { titleTag: 'h1', roomy: true });
face.title.id = 'hero-title';
face.ring.el.classList.add('ring-large');
$('hero-ring').append(face.ring.el);
const facts = el('dl', 'facts');
const fact = (name) => {
  const dd = el('dd', `fact-${name}`);
  facts.append(el('dt', null, name), dd);
  return dd;
};
const facted = { state: fact('state'), id: fact('id'), started: fact('started'), updated: fact('updated'), by: fact('by') };
const link = el('a', 'task-url');
link.rel = 'noopener noreferrer';
link.hidden = true;
const actions = el('div', 'actions');
actions.hidden = true;
const note = el('p', 'action-note');
note.hidden = true;
note.setAttribute('role', 'status');
const copies = el('div', 'copies');
const copyBadge = el('button', 'copy-badge', 'Copy badge Markdown');
const copyCurl = el('button', 'copy-curl', 'Copy curl to update this task');
copyBadge.type = copyCurl.type = 'button';
copies.append(copyBadge, copyCurl);
$('hero-info').append(face.info);
face.info.append(link, facts, actions, note, copies);
actions.addEventListener('click', (e) => {
  const button = e.target.closest('button');
  if (button) act(button, id, note, () => store.tasks.get(id));
});
note.addEventListener('click', (e) => {
  const button = e.target.closest('button');
  if (button) act(button, id, note, () => store.tasks.get(id));
});
copyBadge.addEventListener('click', () => copy(copyBadge,
  `[![${store.tasks.get(id)?.title || id}](${appURL(`badge/${encodeURIComponent(id)}.svg`).href})](${taskPageURL(id)})`));
copyCurl.addEventListener('click', () => copy(copyCurl,
  `curl -X POST -d '{"progress":0.5,"detail":"halfway"}' ${appURL(`api/tasks/${encodeURIComponent(id)}`).href}`));

async function copy(button, text) {
  const label = button.textContent;
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = 'Copied';
  } catch {
    button.textContent = 'Copy failed: no clipboard permission';
    console.warn(`ringcast: copy this yourself: ${text}`);
  }
  button.dataset.copied = text;
  setTimeout(() => { button.textContent = label; }, 2500);
}

const log = new LogPanel({
  id, box: $('log'), count: $('log-count'), empty: $('log-empty'), follow: $('log-follow'), search: $('log-search'), copy: $('log-copy'),
});
const timeline = new TimelineView($('timeline'), id);

// Keyboard: `/` searches the log; Escape leaves the search box.
document.addEventListener('keydown', (e) => {
  if (e.key === '/' && !/^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement.tagName)) {
    e.preventDefault();
    $('log-search').focus();
  } else if (e.key === 'Escape' && document.activeElement === $('log-search')) {
    $('log-search').blur();
  }
});

// The kind's past runs: loaded once, and again when this run finishes (it is one of them then).
let kinds = null;
async function loadKinds() {
  try {
    const r = await fetch(appURL('api/kinds'), { headers: { Accept: 'application/json' } });
    kinds = r.ok ? (await r.json()).kinds || [] : [];
  } catch {
    kinds = [];
  }
  drawRuns(store.serverNow());
}

let lastRuns = '';
function drawRuns(now) {
  const task = store.tasks.get(id);
  const box = $('runs');
  if (!task || !kinds) return;
  const kind = kindOf(task);
  const entry = kinds.find((k) => k.kind === kind);
  const runs = entry && Array.isArray(entry.durations) ? entry.durations : [];
  const elapsed = TERMINAL.has(stateOf(task)) || typeof task.startedAt !== 'number'
    ? null : Math.round(Math.max(0, now - task.startedAt) / 1000);
  const key = `${kind}|${runs.join(',')}|${elapsed}`;
  if (key === lastRuns) return;
  lastRuns = key;
  if (!runs.length) {
    box.replaceChildren(el('p', 'muted', `No finished runs of ${kind} yet: once some are done, this shows how long they took.`));
    return;
  }
  box.replaceChildren(
    runsChart(runs, { med: entry.median, p: entry.p90, elapsed, kind }),
    el('p', 'muted', `${kind}: ${runs.length} run${runs.length === 1 ? '' : 's'}, usually ${formatClock(entry.median)}, 90 % within ${formatClock(entry.p90)}`));
}

// Steps: the tasks under this one, as a tree, each with its own small ring and page.
function stepTree(parentId, depth) {
  const kids = [...store.tasks.values()].filter((t) => t.parent === parentId).sort((a, b) => (a.id < b.id ? -1 : 1));
  if (!kids.length || depth > 8) return null;
  const list = el('ul', depth ? 'steps' : null);
  for (const kid of kids) {
    const li = el('li', 'step');
    li.dataset.id = kid.id;
    li.dataset.state = stateOf(kid);
    const ring = createRing();
    ring.el.classList.add('ring-small');
    setRing(ring, ringView(kid, store.serverNow()));
    const a = el('a', null, kid.title || kid.id);
    a.href = taskPageURL(kid.id);
    li.append(ring.el, a, el('span', 'step-state', stateLabel(stateOf(kid))));
    const below = stepTree(kid.id, depth + 1);
    if (below) li.append(below);
    list.append(li);
  }
  return list;
}

const last = {};
let frame = 0;
let stepsDirty = true;
function schedule() {
  if (!frame) frame = requestAnimationFrame(render);
}

function render() {
  frame = 0;
  const now = store.serverNow();
  const task = store.tasks.get(id);
  write(last, 'missing', store.everSynced && !task, (missing) => {
    $('missing').hidden = !missing;
    if (missing) {
      $('missing').replaceChildren(`No task “${id}” on this server now: it may not have started yet, or it finished and was forgotten. `,
        Object.assign(el('a', null, 'Back to the dashboard'), { href: appURL('').href }));
    }
    hero.hidden = missing;
  });
  if (task) {
    const text = faceText(task, now);
    writeFace(face, text);
    write(last, 'doc-title', text.title, (v) => {
      document.title = `${v} · Ringcast`;
      $('crumb-self').textContent = v;
    });
    write(last, 'state', stateOf(task), (v) => {
      facted.state.textContent = stateLabel(v);
      hero.dataset.state = v;
    });
    write(last, 'id', task.id, (v) => { facted.id.textContent = v; });
    write(last, 'started', task.startedAt || 0, (v) => { facted.started.textContent = v ? new Date(v).toLocaleString() : ''; });
    write(last, 'updated', task.updatedAt || 0, (v) => { facted.updated.textContent = v ? new Date(v).toLocaleString() : ''; });
    write(last, 'by', task.by || '', (v) => { facted.by.textContent = v || '—'; });
    write(last, 'url', task.url || '', (v) => {
      const safe = safeLink(v);
      link.hidden = !safe;
      if (safe) {
        link.href = safe.href;
        link.textContent = safe.text;
      } else {
        link.removeAttribute('href');
      }
    });
    write(last, 'parent', task.parent || '', (v) => {
      $('crumb-parent').hidden = !v;
      if (v) {
        const parent = store.tasks.get(v);
        $('parent-link').href = taskPageURL(v);
        $('parent-link').textContent = parent?.title || v;
      }
    });
    const offered = offeredActions(task);
    write(last, 'actions', offered.join(','), () => setButtons(actions, offered, text.title));
    log.catchUp(task.logCount || 0);
    drawRuns(now);
  }
  if (stepsDirty) {
    stepsDirty = false;
    const tree = stepTree(id, 0);
    $('steps-panel').hidden = !tree;
    $('steps').replaceChildren(...(tree ? tree.children : []));
  }
  if (task && ringView(task, now).active) schedule();
}

store.subscribe((c) => {
  if (c.type === 'log' && c.id === id) {
    log.append(c.from, c.lines);
    return;
  }
  if (c.type === 'task' || c.type === 'remove') {
    if (c.id !== id) stepsDirty = true;
    if (c.id === id && c.type === 'task') {
      const before = c.prev || {};
      const now = c.task;
      // What the timeline records changed: load it again.
      if (!c.prev || before.state !== now.state || before.visible !== now.visible || before.cancelRequested !== now.cancelRequested
        || before.pauseRequested !== now.pauseRequested || before.seq == null) timeline.refresh();
      if (c.prev && stateOf(before) !== stateOf(now)) {
        $('announcer').textContent = `${now.title || id}: ${stateLabel(stateOf(now))}`;
        if (TERMINAL.has(stateOf(now))) loadKinds();
      }
    }
    if (c.id === id && c.type === 'remove') stepsDirty = true;
    schedule();
  } else if (c.type === 'synced') {
    document.body.dataset.seq = String(store.seq);
    stepsDirty = true;
    schedule();
  }
});
// Elapsed time, quiet publishers and the chart's "this run" move by themselves.
setInterval(schedule, 1000);
store.subscribe((c) => {
  if (c.type === 'task' || c.type === 'remove') {
    requestAnimationFrame(() => { document.body.dataset.seq = String(store.seq); });
  }
});

function showStatus(state, text, transport) {
  const status = $('status');
  status.dataset.state = state;
  if (transport) status.dataset.transport = transport;
  status.querySelector('.status-text').textContent = text;
  document.body.dataset.conn = state;
}

async function start() {
  try {
    const r = await fetch(appURL('api/session'), { credentials: 'same-origin' });
    if (r.ok) setGrant(await r.json());
  } catch { /* the page still shows what it may read */ }
  const connection = new Connection({
    url: (since) => socketURL(pageServer(location), `${id},${id}.*`, since),
    streamURL: (since) => streamURL(pageServer(location), `${id},${id}.*`, since),
    since: () => store.since(),
    onEvent(ev) {
      if (ev.type === 'error' && (ev.error === 'unauthorized' || ev.error === 'forbidden' || ev.error === 'invalid_pattern')) {
        connection.stop();
        $('missing').hidden = false;
        $('missing').replaceChildren(`${ev.message} `, Object.assign(el('a', null, 'Sign in on the dashboard'), { href: appURL('').href }));
        hero.hidden = true;
        showStatus('offline', 'Not allowed');
        return;
      }
      store.handle(ev);
    },
    onStatus: showStatus,
    onLost: () => store.connectionLost(),
    onRefused: (_code, reason) => {
      $('missing').hidden = false;
      $('missing').replaceChildren(`${reason || 'This page may not read the task.'} `,
        Object.assign(el('a', null, 'Sign in on the dashboard'), { href: appURL('').href }));
      hero.hidden = true;
    },
  });
  showStatus('reconnecting', 'Connecting…');
  connection.start();
  log.load();
  timeline.refresh();
  loadKinds();
}

start();
