// The client through Debian's tinyproxy on loopback: the environment's proxy (or the `proxy`
// option) carries the WebSocket and the HTTP reads by CONNECT, which the proxy's log shows;
// NO_PROXY naming the server's host sends them direct; a proxy that refuses CONNECT is an error
// naming it and its status. NO_PROXY's own reading is checked against a table.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import { Ringcast, RingcastError } from '../src/index.js';
import { bypassed, chooseProxy } from '../src/proxy.js';
import { Server, waitFor } from './server.js';

const TINYPROXY = '/usr/bin/tinyproxy';
const VARIABLES = ['HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy', 'NO_PROXY', 'no_proxy', 'ALL_PROXY', 'all_proxy'];
const server = new Server();
const proxies = [];

function freePort() {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

function canConnect(port) {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** tinyproxy on a loopback port with its own config and log; `extra` lines go in the config. */
async function startProxy(extra = '') {
  if (!existsSync(TINYPROXY)) throw new Error('tinyproxy is not installed: scripts/deps.sh test installs it');
  const folder = mkdtempSync(path.join(tmpdir(), 'ringcast-node-proxy-'));
  const port = await freePort();
  const log = path.join(folder, 'tinyproxy.log');
  const config = path.join(folder, 'tinyproxy.conf');
  // No ConnectPort line unless `extra` has one: CONNECT to any port (the server's is ephemeral).
  writeFileSync(config, `Port ${port}\nListen 127.0.0.1\nTimeout 30\nLogFile "${log}"\nLogLevel Connect\nMaxClients 50\nAllow 127.0.0.1\n${extra}`);
  const child = spawn(TINYPROXY, ['-d', '-c', config], { stdio: 'ignore' });
  const proxy = {
    url: `http://127.0.0.1:${port}`,
    folder,
    process: child,
    /** The CONNECTs the proxy's log shows to `target`'s port. */
    tunnels(target) {
      const text = existsSync(log) ? readFileSync(log, 'utf8') : '';
      return text.split('\n').filter((line) => line.includes(`CONNECT 127.0.0.1:${target} `)).length;
    },
  };
  proxies.push(proxy);
  await waitFor(() => canConnect(port), 10000, `tinyproxy listening on ${port}`);
  return proxy;
}

/** A client made with `env` as the proxy variables (and nothing else of them), which publishes and reads back. */
async function publishAndRead(id, env = {}, options = {}) {
  const saved = Object.fromEntries(VARIABLES.map((name) => [name, process.env[name]]));
  for (const name of VARIABLES) delete process.env[name];
  Object.assign(process.env, env);
  let rc;
  try {
    rc = new Ringcast({ url: server.url, ...options });
  } finally {
    for (const name of VARIABLES) {
      if (saved[name] === undefined) delete process.env[name];
      else process.env[name] = saved[name];
    }
  }
  try {
    rc.update(id, { progress: 0.4, title: 'proxied' });
    await rc.flush({ timeout: 10000 });
    return await rc.get(id);
  } finally {
    await rc.close({ timeout: 2000 }).catch(() => {});
  }
}

before(() => server.start());
after(async () => {
  for (const proxy of proxies) {
    if (proxy.process.exitCode === null) {
      const exited = new Promise((resolve) => proxy.process.once('exit', resolve));
      proxy.process.kill('SIGTERM');
      await exited;
    }
    rmSync(proxy.folder, { recursive: true, force: true });
  }
  await server.stop();
});

test('the environment\u2019s proxy carries the WebSocket and the reads by CONNECT', async () => {
  const proxy = await startProxy();
  const task = await publishAndRead('node.proxy-env', { http_proxy: proxy.url });
  assert.equal(task.progress, 0.4);
  // One tunnel for the publishing WebSocket, one for the read.
  await waitFor(() => proxy.tunnels(server.port) >= 2, 5000, 'two CONNECTs in the proxy\u2019s log');
  assert.equal((await server.task('node.proxy-env')).title, 'proxied');
});

test('HTTPS_PROXY alone is for https and wss servers; HTTP_PROXY carries a plain one', async () => {
  const proxy = await startProxy();
  await publishAndRead('node.proxy-upper', { HTTPS_PROXY: proxy.url });
  await sleep(300);
  assert.equal(proxy.tunnels(server.port), 0);
  await publishAndRead('node.proxy-upper', { HTTP_PROXY: proxy.url });
  await waitFor(() => proxy.tunnels(server.port) >= 2, 5000, 'HTTP_PROXY\u2019s two CONNECTs');
});

for (const noProxy of ['127.0.0.1', 'localhost, 127.0.0.1', '*', '127.0.0.1:PORT']) {
  test(`NO_PROXY=${noProxy} naming the server sends it direct`, async () => {
    const proxy = await startProxy();
    const task = await publishAndRead('node.proxy-direct', { HTTP_PROXY: proxy.url, NO_PROXY: noProxy.replace('PORT', String(server.port)) });
    assert.equal(task.progress, 0.4);
    await sleep(300);
    assert.equal(proxy.tunnels(server.port), 0);
  });
}

test('the proxy option overrides the environment', async () => {
  const proxy = await startProxy();
  await publishAndRead('node.proxy-option', { HTTP_PROXY: 'http://127.0.0.1:9' }, { proxy: null });
  await sleep(300);
  assert.equal(proxy.tunnels(server.port), 0);
  await publishAndRead('node.proxy-option', { NO_PROXY: '127.0.0.1' }, { proxy: proxy.url });
  await waitFor(() => proxy.tunnels(server.port) >= 2, 5000, 'the option\u2019s two CONNECTs');
});

test('a proxy that refuses CONNECT is an error naming it and its status', async () => {
  const refusing = await startProxy('ConnectPort 443\n');
  const rc = new Ringcast({ url: server.url, proxy: refusing.url, timeout: 5000 });
  try {
    await assert.rejects(rc.get('node.anything'), (error) => {
      assert.ok(error instanceof RingcastError);
      assert.equal(error.error, 'unreachable');
      assert.match(error.message, new RegExp(`${refusing.url}.*403`));
      return true;
    });
  } finally {
    await rc.close({ timeout: 1000 }).catch(() => {});
  }
});

test('a proxy URL that is not http is refused at once', () => {
  assert.throws(() => new Ringcast({ url: server.url, proxy: 'socks5://127.0.0.1:1080' }), (error) => error.field === 'proxy');
});

test('NO_PROXY is a comma list of hosts or domain suffixes, each with an optional port, or *', () => {
  const cases = [
    ['example.com', 'ci.example.com', 443, true],
    ['.example.com', 'ci.example.com', 443, true],
    ['*.example.com', 'ci.example.com', 443, true],
    ['example.com', 'example.com', 443, true],
    ['example.com', 'notexample.com', 443, false],
    ['example.com:8443', 'example.com', 443, false],
    ['example.com:8443', 'example.com', 8443, true],
    ['  other.org , EXAMPLE.com ', 'example.com', 80, true],
    ['[::1]:8080', '::1', 8080, true],
    ['::1', '::1', 8080, true],
    ['*', 'anything', 1, true],
    ['', 'example.com', 443, false],
  ];
  for (const [list, host, port, expected] of cases) assert.equal(bypassed(list, host, port), expected, `${list} / ${host}:${port}`);
  const server = { secure: true, host: 'ci.example.com', port: 443 };
  assert.equal(chooseProxy(undefined, server, { https_proxy: 'http://a:1', HTTPS_PROXY: 'http://b:2' }).port, 1, 'lower case first');
  assert.equal(chooseProxy(undefined, server, { HTTP_PROXY: 'http://b:2' }), null, 'http_proxy is not for https');
  assert.equal(chooseProxy(undefined, server, { HTTPS_PROXY: 'http://b:2', no_proxy: 'example.com' }), null);
  assert.equal(chooseProxy('http://c:3', server, { no_proxy: '*' }).port, 3, 'the option wins');
});

test('an https server is reached by tls inside the tunnel, verified as without a proxy', async () => {
  const proxy = await startProxy();
  const folder = proxy.folder;
  const [cert, key] = [path.join(folder, 'cert.pem'), path.join(folder, 'key.pem')];
  const made = spawnSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '2', '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1'], { encoding: 'utf8' });
  assert.equal(made.status, 0, `openssl could not make a certificate (scripts/deps.sh test installs it): ${made.stderr}`);
  const secure = new Server({ settings: { tls: { cert, key } } });
  await secure.start();
  try {
    const task = await publishAndRead('node.proxy-tls', { HTTPS_PROXY: proxy.url }, { url: secure.url, tlsOptions: { ca: readFileSync(cert) } });
    assert.equal(task.progress, 0.4);
    await waitFor(() => proxy.tunnels(secure.port) >= 2, 5000, 'the wss and https CONNECTs');
    // Unknown to the default store, the certificate fails the read, now checked through the tunnel.
    const rc = new Ringcast({ url: secure.url, proxy: proxy.url, timeout: 5000 });
    try {
      await assert.rejects(rc.get('node.proxy-tls'), /through the proxy .*certificate/);
    } finally {
      await rc.close({ timeout: 1000 }).catch(() => {});
    }
    assert.ok(proxy.tunnels(secure.port) >= 3);
  } finally {
    await secure.stop();
  }
});
