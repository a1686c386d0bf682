// The client against a server that breaks the protocol or sends without end: what it holds, how
// long a call takes and how often it reconnects stay bounded, and the user is told. Each client
// runs in a process of its own (its peak RSS and CPU time are then its own); the bounds asserted
// are generous against what they guard (the client's limit is 16 MiB a message and 4 096
// fragments; unbounded, endless fragments took gigabytes in seconds).

import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { test } from 'node:test';

import { MAX_DEPTH, nestedDeeper } from '../src/reading.js';
import { MAX_FRAGMENTS, MAX_MESSAGE, WebSocketConnection } from '../src/websocket.js';
import { HostileServer, frame, runClient } from './hostile.js';

// A client that publishes into the server for `ms`, then reports what it cost.
function publisher(ms) {
  return `
    const rss = peakMiB();
    const cpu = cpuSeconds();
    const rc = new ringcast.Ringcast({ url: URL, timeout: 2000 });
    process.removeAllListeners('warning');
    process.on('warning', () => {});
    rc.update('node.hostile', { progress: 0.5 });
    await sleep(${ms});
    report({ rssGrowth: peakMiB() - rss, cpu: cpuSeconds() - cpu, errors: rc.errors.map((e) => [e.error, e.message]) });
  `;
}

async function against(handlers, source) {
  const server = await new HostileServer(handlers).start();
  try {
    const started = Date.now();
    const result = await runClient(source, server.url);
    return { result, server, seconds: (Date.now() - started) / 1000 };
  } finally {
    await server.stop();
  }
}

test('endless fragments are cut at the message limit with 1009', async () => {
  const { result, server } = await against({
    websocket(socket, record) {
      socket.write(frame(Buffer.alloc(65536, 0x20), { final: false }));
      this.sendWhileTaken(socket, record, frame(Buffer.alloc(65536, 0x20), { opcode: 0x0, final: false }));
    },
  }, publisher(3000));
  const [first] = server.websockets();
  // The client took the message limit and what the kernel buffers hold, not more.
  assert.ok(first.sent < MAX_MESSAGE + 16 * 1024 * 1024, `${first.sent} bytes taken`);
  assert.equal(first.closeCode, 1009);
  // Each connection's 16 MiB and the chunks it came in, until the collector runs (about 80 MiB
  // here over four connections).
  assert.ok(result.rssGrowth < 200, JSON.stringify(result));
  assert.equal(result.errors[0]?.[0], 'protocol_violation', JSON.stringify(result));
  assert.match(result.errors[0][1], /16 MiB/);
});

test('a message in 40 000 one-byte fragments costs little CPU', async () => {
  const message = Buffer.from(`{"type":"error","error":"x","message":"${'y'.repeat(39960)}"}`);
  const frames = [frame(message.subarray(0, 1), { final: false })];
  for (let i = 1; i < message.length - 1; i++) frames.push(frame(message.subarray(i, i + 1), { opcode: 0x0, final: false }));
  frames.push(frame(message.subarray(message.length - 1), { opcode: 0x0 }));
  assert.ok(frames.length >= 40000);
  const all = Buffer.concat(frames);
  const { result, server } = await against({ websocket: (socket) => socket.write(all) }, publisher(3000));
  assert.equal(server.websockets()[0].closeCode, 1009);
  assert.ok(result.cpu < 1.5, JSON.stringify(result));
  assert.ok(result.errors.some(([, text]) => text.includes(`${MAX_FRAGMENTS} fragments`)), JSON.stringify(result));
});

test('a message nested 200 000 deep is refused, and reconnects back off', async () => {
  const deep = frame('['.repeat(200000) + ']'.repeat(200000));
  const { result, server, seconds } = await against({ websocket: (socket) => socket.write(deep) }, publisher(4000));
  const connections = server.websockets();
  assert.equal(connections[0].closeCode, 1009);
  assert.ok(result.errors.some(([, text]) => text.includes(`deeper than ${MAX_DEPTH}`)), JSON.stringify(result));
  // The back-off grows after each connection that broke the protocol (at least 1/8, 1/4, 1/2,
  // 1, 2 s): a handful in the window, not a loop that starts over at every hello.
  assert.ok(connections.length <= 8, `${connections.length} connections in ${seconds} s`);
});

test('endless pings from a server that never reads leave the pongs bounded', async () => {
  const { result, server } = await against({
    websocket(socket, record) {
      socket.pause(); // reads nothing more: not the close, not a pong
      this.sendWhileTaken(socket, record, frame(Buffer.alloc(125, 0x70), { opcode: 0x9 }));
    },
  }, publisher(3000));
  assert.ok(server.websockets()[0].sent > 16 * 1024 * 1024, 'the client took the pings');
  // About 25 MiB here; answering every ping, the queued pongs took over 90 MiB in the same time,
  // and growing.
  assert.ok(result.rssGrowth < 64, JSON.stringify(result));
});

for (const answer of ['endless', 'drip-body', 'drip-head']) {
  test(`get() is bounded in time and size (${answer})`, async () => {
    const { result } = await against({
      http(socket, record) {
        const head = answer === 'drip-head' ? 'HTTP/1.1 200 OK\r\n' : 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n';
        socket.write(head);
        const piece = answer === 'endless' ? Buffer.alloc(65536, 0x5b) : Buffer.from(answer === 'drip-head' ? 'X' : ' ');
        this.sendWhileTaken(socket, record, piece, { every: answer === 'endless' ? 0 : 50 });
      },
    }, `
      const rc = new ringcast.Ringcast({ url: URL, timeout: 2000 });
      process.removeAllListeners('warning');
      process.on('warning', () => {});
      const rss = peakMiB();
      const started = Date.now();
      let outcome;
      try {
        await rc.get('node.hostile');
        outcome = ['answered', ''];
      } catch (error) {
        outcome = [error.error, error.message];
      }
      report({ seconds: (Date.now() - started) / 1000, rssGrowth: peakMiB() - rss, outcome });
    `);
    assert.ok(result.seconds < 3, JSON.stringify(result));
    assert.ok(result.rssGrowth < 150, JSON.stringify(result));
    assert.equal(result.outcome[0], answer === 'endless' ? 'answer_too_large' : 'timeout', JSON.stringify(result));
    assert.match(result.outcome[1], answer === 'endless' ? /16 MiB/ : /within 2000 ms/);
  });
}

test('nesting is judged without counting brackets inside strings', () => {
  assert.equal(nestedDeeper(`{"a":"${'['.repeat(1000)}\\"["}`, MAX_DEPTH), false);
  assert.equal(nestedDeeper('['.repeat(MAX_DEPTH) + ']'.repeat(MAX_DEPTH), MAX_DEPTH), false);
  assert.equal(nestedDeeper('['.repeat(MAX_DEPTH + 1) + ']'.repeat(MAX_DEPTH + 1), MAX_DEPTH), true);
});

/** What a connection makes of `data` from its server: the messages, and how it closed. */
async function parsed(data) {
  const socket = new EventEmitter();
  socket.write = () => true;
  socket.end = () => {};
  socket.destroy = () => {};
  const ws = new WebSocketConnection(socket, data);
  const messages = [];
  let closed = null;
  ws.on('message', (text) => messages.push(text));
  ws.on('close', (event) => {
    closed = event;
  });
  await new Promise((resolve) => setImmediate(resolve));
  return { messages, closed };
}

test('a message of the most fragments is put together, and one more is refused', async () => {
  const message = Buffer.from(`{"type":"hello"}${' '.repeat(MAX_FRAGMENTS - 16)}`);
  const pieces = [frame(message.subarray(0, 1), { final: false })];
  for (let i = 1; i < MAX_FRAGMENTS - 1; i++) pieces.push(frame(message.subarray(i, i + 1), { opcode: 0x0, final: false }));
  const whole = await parsed(Buffer.concat([...pieces, frame(message.subarray(-1), { opcode: 0x0 })]));
  assert.deepEqual(whole.messages, [message.toString()]);
  const tooMany = await parsed(Buffer.concat([...pieces, frame(' ', { opcode: 0x0, final: false }), frame(' ', { opcode: 0x0 })]));
  assert.deepEqual([tooMany.messages, tooMany.closed?.code, tooMany.closed?.violation], [[], 1009, true]);
});

test('frames a server must not send close the connection with the right code', async () => {
  const huge = Buffer.from([0x81, 127, 0, 0, 0, 0, 0, 0, 0, 0]);
  huge.writeBigUInt64BE(BigInt(MAX_MESSAGE + 1), 2);
  const cases = [
    [frame('x', { opcode: 0x0 }), 1002], // a continuation of nothing
    [Buffer.concat([frame('[', { final: false }), frame(']')]), 1002], // a message begun inside another
    [Buffer.from([0x81, 0x81, 1, 2, 3, 4, 5]), 1002], // masked, as only a client may
    [frame('x'.repeat(126), { opcode: 0x9 }), 1002], // a ping longer than a control frame may be
    [frame(Buffer.from([0xff, 0xfe])), 1007], // text that is not UTF-8
    [huge, 1009],
  ];
  for (const [data, code] of cases) {
    const { messages, closed } = await parsed(data);
    assert.deepEqual([messages, closed?.code, closed?.violation], [[], code, true], data.subarray(0, 12).toString('hex'));
  }
});
