// A real `ringcast serve` for the Node client's tests (RINGCAST_BIN, default the debug build
// .build/debug/ringcast; missing, the tests fail) on an ephemeral loopback port.

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const BINARY = process.env.RINGCAST_BIN ? path.resolve(REPO, process.env.RINGCAST_BIN) : path.join(REPO, '.build/debug/ringcast');

export class Server {
  constructor({ storage = null, settings = {} } = {}) {
    if (!existsSync(BINARY)) throw new Error(`ringcast binary not found at ${BINARY}: build it (swift build) or point RINGCAST_BIN at it`);
    this.folder = mkdtempSync(path.join(tmpdir(), 'ringcast-node-'));
    this.storage = storage;
    this.settings = settings;
    this.port = 0;
  }

  get url() {
    return `${this.settings.tls ? 'https' : 'http'}://127.0.0.1:${this.port}`;
  }

  /** Starts the server (on `port`, for a restart), resolving once it answers. */
  async start(port = 0) {
    const config = path.join(this.folder, 'config.json');
    writeFileSync(config, JSON.stringify({
      host: '127.0.0.1', port: 0, publicDir: path.join(REPO, 'Public'), heartbeatSeconds: 2,
      ...(this.storage ? { storage: path.join(this.folder, this.storage) } : {}), ...this.settings,
    }));
    this.process = spawn(BINARY, ['serve', '--port', String(port), '--config', config], { cwd: this.folder, stdio: ['ignore', 'pipe', 'ignore'] });
    const line = await new Promise((resolve, reject) => {
      let text = '';
      const timer = setTimeout(() => reject(new Error('ringcast printed nothing in 20 s')), 20000);
      this.process.stdout.on('data', (chunk) => {
        text += chunk;
        if (text.includes('\n')) {
          clearTimeout(timer);
          resolve(text.split('\n')[0]);
        }
      });
      this.process.once('exit', (code) => reject(new Error(`ringcast exited with ${code}`)));
    });
    const match = /^listening on https?:\/\/127\.0\.0\.1:(\d+)/.exec(line);
    if (!match) throw new Error(`unexpected first line from ringcast: ${line}`);
    this.port = Number(match[1]);
    this.process.stdout.resume();
    return this;
  }

  async stop() {
    if (!this.process || this.process.exitCode !== null) return;
    const exited = new Promise((resolve) => this.process.once('exit', resolve));
    this.process.kill('SIGTERM');
    await exited;
  }

  async api(method, rest, body) {
    const answer = await fetch(this.url + rest, { method, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await answer.text();
    return { status: answer.status, body: text ? JSON.parse(text) : null };
  }

  async task(id) {
    const { status, body } = await this.api('GET', `/api/tasks/${id}`);
    return status === 404 ? null : body;
  }

  async metric(name) {
    const text = await (await fetch(`${this.url}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith(`${name} `));
    if (!line) throw new Error(`/metrics has no ${name}`);
    return Number(line.split(' ')[1]);
  }

  /** Polls until `condition(task)` holds; bounds a hang, it is not what a test asserts. */
  async waitTask(id, condition, timeout = 15000) {
    const deadline = Date.now() + timeout;
    let last = null;
    while (Date.now() < deadline) {
      last = await this.task(id);
      if (last && condition(last)) return last;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    throw new Error(`task ${id} did not reach the expected state within ${timeout} ms (last ${JSON.stringify(last)})`);
  }
}

export async function waitFor(condition, timeout = 15000, message = 'condition not met') {
  const deadline = Date.now() + timeout;
  while (Date.now() < deadline) {
    const value = await condition();
    if (value) return value;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`${message} within ${timeout} ms`);
}
