// The Node client against a real server: every method, the merge, flush across a restart,
// scoped tasks with cancel and pause from the API, a mirrored node-progress bar, the flush at exit
// and a killed process's stalled task.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { Cancelled, Ringcast, RingcastError } from '../src/index.js';
import { Server, waitFor } from './server.js';

const MODULE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../src/index.js');
const server = new Server();
const clients = [];

function client(options = {}) {
  const rc = new Ringcast({ url: server.url, ...options });
  clients.push(rc);
  return rc;
}

before(() => server.start());
after(async () => {
  for (const rc of clients) await rc.close({ timeout: 2000 }).catch(() => {});
  await server.stop();
});

test('update sets what is given and null clears', async () => {
  const rc = client();
  rc.update('node.update', { completed: 42, total: 100, title: 'Import', detail: 'orders.csv', staleAfter: 30 });
  await rc.flush();
  let task = await server.task('node.update');
  assert.deepEqual([task.completed, task.total, task.progress, task.title, task.detail, task.staleAfter], [42, 100, 0.42, 'Import', 'orders.csv', 30]);
  rc.update('node.update', { progress: null, detail: null });
  rc.update('node.update', { state: 'done' });
  await rc.flush();
  task = await server.task('node.update');
  assert.equal(task.state, 'done');
  assert.equal(task.detail, undefined);
});

test('show, hide, timers, log and remove', async () => {
  const rc = client();
  rc.show('node.show', { hideAfter: 60, modal: true });
  await rc.flush();
  assert.equal((await server.task('node.show')).modal, true);
  rc.hide('node.show');
  rc.timer('node.tea', { seconds: 120, title: 'Tea' });
  rc.pauseTimer('node.tea');
  await rc.flush();
  assert.equal((await server.task('node.show')).visible, false);
  assert.equal((await server.task('node.tea')).state, 'paused');
  rc.resumeTimer('node.tea');
  rc.cancelTimer('node.tea');
  rc.log('node.show', ['one', 'two']);
  rc.log('node.show', 'three\n');
  await rc.flush();
  assert.equal((await server.task('node.tea')).state, 'cancelled');
  assert.deepEqual((await rc.readLog('node.show')).lines, ['one', 'two', 'three']);
  rc.remove('node.tea');
  await rc.flush();
  assert.equal(await server.task('node.tea'), null);
});

test('a value the server would refuse throws at the call; a later refusal rejects flush', async () => {
  const rc = client();
  assert.throws(() => rc.update('node.bad', { progress: 1.5 }), (e) => e instanceof RingcastError && e.error === 'invalid_field' && e.field === 'progress' && /0\.42 for 42%/.test(e.message));
  assert.throws(() => rc.update('no spaces allowed', {}), (e) => e.error === 'invalid_id');
  assert.throws(() => rc.update('node.bad', { progres: 0.5 }), (e) => e.error === 'unknown_field' && e.field === 'progres');
  assert.throws(() => rc.timer('node.bad', {}), (e) => e.error === 'missing_field' && e.field === 'seconds');
  assert.throws(() => new Ringcast({ url: '127.0.0.1:8080' }), (e) => e.field === 'url');
  assert.equal(rc.stats.accepted, 0);
  rc.hide('node.missing');
  await assert.rejects(rc.flush(), (e) => e.error === 'not_found' && e.field === 'id' && e.id === 'node.missing');
  assert.equal(rc.errors.length, 1);
});

test('a 100 000-update loop sends a bounded number of messages and the exact last value', async () => {
  const rc = client();
  rc.update('node.loop', { title: 'Tight loop' });
  await rc.flush();
  const before = await server.metric('ringcast_client_messages_total');
  const start = { ...rc.stats };
  const began = Date.now();
  for (let i = 0; i < 100000; i++) {
    rc.update('node.loop', { completed: i + 1, total: 100000 });
    if (i % 1000 === 999) await new Promise((resolve) => setImmediate(resolve)); // let the client write
  }
  await rc.flush();
  const elapsed = Date.now() - began;
  const frames = rc.stats.frames - start.frames;
  const markers = rc.stats.markers - start.markers;
  assert.ok(frames <= elapsed / rc.sendInterval + 2, `${frames} frames in ${elapsed} ms`);
  assert.equal(rc.stats.sent - start.sent, frames);
  assert.equal((await server.metric('ringcast_client_messages_total')) - before, frames + markers);
  const task = await server.task('node.loop');
  assert.deepEqual([task.completed, task.total], [100000, 100000]);
});

test('flush resolves once the restarted server has kept what was queued while it was down', async () => {
  const restarted = new Server({ storage: 'ringcast.db' });
  await restarted.start();
  const rc = new Ringcast({ url: restarted.url, timeout: 5000 });
  try {
    rc.update('node.restart', { completed: 1, total: 1000 });
    await rc.flush();
    const port = restarted.port;
    await restarted.stop();
    await waitFor(() => !rc.connected, 15000, 'the client did not notice the server stopped');
    for (let i = 2; i <= 1000; i++) rc.update('node.restart', { completed: i });
    rc.log('node.restart', 'while the server was down');
    await restarted.start(port);
    await rc.flush({ timeout: 30000 });
    assert.equal((await restarted.task('node.restart')).completed, 1000);
    assert.deepEqual((await rc.readLog('node.restart')).lines, ['while the server was down']);
  } finally {
    await rc.close({ timeout: 2000 }).catch(() => {});
    await restarted.stop();
  }
});

test('a task ends done, failed or cancelled as its body ends, with children by weight', async () => {
  const rc = client();
  const result = await rc.task('node.etl', { title: 'Nightly' }, async (job) => {
    const extract = job.child('extract', { weight: 1, total: 10 });
    const transform = job.child('transform', { weight: 2 });
    for (let i = 0; i < 10; i++) await extract.advance();
    await transform.update({ progress: 0.5 });
    await rc.flush();
    const parent = await server.task('node.etl');
    assert.ok(Math.abs(parent.progress - 2 / 3) < 1e-9, `parent at ${parent.progress}`);
    assert.deepEqual((await server.task('node.etl')).controls, ['cancel', 'pause', 'resume']);
    return 'rows';
  });
  assert.equal(result, 'rows');
  assert.equal((await server.task('node.etl')).state, 'done');
  assert.equal((await server.task('node.etl.transform')).state, 'done');
  await assert.rejects(rc.task('node.fail', async () => {
    throw new TypeError('row 17 has no date');
  }), TypeError);
  const failed = await server.task('node.fail');
  assert.deepEqual([failed.state, failed.detail], ['failed', 'TypeError: row 17 has no date']);
});

test('a cancel from the API aborts the signal and throws Cancelled at the next update', async () => {
  const rc = client();
  let aborted = false;
  let iterations = 0;
  await assert.rejects(rc.task('node.cancel', { total: 1e6 }, async (task) => {
    task.signal.addEventListener('abort', () => { aborted = true; });
    for (let i = 0; i < 1e6; i++) {
      await task.update({ completed: i });
      iterations = i;
      if (i === 5) {
        await rc.flush();
        assert.equal((await server.api('POST', '/api/tasks/node.cancel/cancel')).body.delivered, 1);
      }
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
  }), Cancelled);
  assert.ok(aborted && iterations < 999999);
  const task = await server.task('node.cancel');
  assert.equal(task.state, 'cancelled');
  assert.equal(task.cancelRequested, undefined);
});

test('a pause holds the next update until resume', async () => {
  const rc = client();
  let paused = null;
  await rc.task('node.pause', { total: 3 }, async (task) => {
    await task.advance();
    await rc.flush();
    await server.api('POST', '/api/tasks/node.pause/pause');
    await waitFor(() => task.root.control.pauseRequested, 15000, 'the pause did not arrive');
    const held = task.advance();
    paused = await server.waitTask('node.pause', (t) => t.state === 'paused');
    await server.api('POST', '/api/tasks/node.pause/resume');
    await held;
    await task.advance();
  });
  assert.equal(paused.completed, 1);
  const task = await server.task('node.pause');
  assert.deepEqual([task.state, task.completed], ['done', 3]);
});

test('a node-progress bar is mirrored and ends with it, or throws Cancelled at its next tick', async () => {
  // Debian's node-progress (scripts/clients-deps.sh installs it): a bar made the usual way.
  const ProgressBar = createRequire(import.meta.url)('/usr/share/nodejs/progress');
  const rc = client();
  const bar = rc.mirror(new ProgressBar(':bar :current/:total', { total: 40 }), { task: 'node.bar', title: 'Files', interval: 0 });
  for (let i = 0; i < 40; i++) bar.tick();
  await rc.flush();
  const done = await server.task('node.bar');
  assert.deepEqual([done.state, done.completed, done.total, done.title], ['done', 40, 40, 'Files']);

  const second = rc.mirror(new ProgressBar(':bar', { total: 1000 }), { task: 'node.bar2' });
  second.tick();
  await rc.flush();
  await server.api('POST', '/api/tasks/node.bar2/cancel');
  await waitFor(async () => {
    try {
      second.tick();
      await new Promise((resolve) => setTimeout(resolve, 5));
      return false;
    } catch (error) {
      return error instanceof Cancelled;
    }
  }, 15000, 'the cancel did not reach the bar');
  await rc.flush();
  assert.equal((await server.task('node.bar2')).state, 'cancelled');
});

test('a script that never closes its client still publishes before it exits', () => {
  const script = `import { Ringcast } from ${JSON.stringify(MODULE)};
    const rc = new Ringcast();
    rc.update('node.exit', { progress: 0.5, title: 'Forgot to close' });`;
  const result = spawnSync(process.execPath, ['--input-type=module', '-e', script], { env: { ...process.env, RINGCAST_URL: server.url }, encoding: 'utf8', timeout: 30000 });
  assert.equal(result.status, 0, result.stderr);
  return server.task('node.exit').then((task) => assert.equal(task.progress, 0.5));
});

test('a script without a server exits at once and says nothing was published', () => {
  const script = `import { Ringcast } from ${JSON.stringify(MODULE)};
    new Ringcast({ url: 'http://127.0.0.1:9' }).update('node.nowhere', { progress: 0.5 });`;
  const result = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30000 });
  assert.equal(result.status, 0);
  assert.match(result.stderr, /ringcast: nothing was published: could not connect to http:\/\/127\.0\.0\.1:9/);
});

test('a task of a killed process turns stalled', async () => {
  const script = `import { Ringcast } from ${JSON.stringify(MODULE)};
    const rc = new Ringcast();
    await rc.task('node.killed', { staleAfter: 30 }, async (task) => {
      await task.update({ progress: 0.4 });
      await rc.flush();
      console.log('ready');
      await new Promise((resolve) => setTimeout(resolve, 120000));
    });`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { env: { ...process.env, RINGCAST_URL: server.url }, stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    await new Promise((resolve) => child.stdout.once('data', resolve));
    assert.equal((await server.task('node.killed')).state, 'running');
    child.kill('SIGKILL');
    const task = await server.waitTask('node.killed', (t) => t.state !== 'running');
    assert.deepEqual([task.state, task.progress], ['stalled', 0.4]);
  } finally {
    child.kill('SIGKILL');
  }
});
