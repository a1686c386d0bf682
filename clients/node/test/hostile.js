// A hostile server for the client's bounds: a raw TCP listener on 127.0.0.1 that speaks just
// enough HTTP and WebSocket (RFC 6455) to be taken for a Ringcast server, and then sends what a
// broken or malicious one could: endless fragments, a message in tens of thousands of frames,
// nesting 200 000 deep, an HTTP answer that never ends or drips.
//
// Every connection is recorded (when it came, its path, the bytes the client took, the close
// code it sent); every loop is bounded in bytes and time, so a client that fails to defend itself
// fails the test instead of hanging it.

import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
export const HELLO = '{"type":"hello","protocol":2,"heartbeat":2}';
// No test needs more than this from one connection: past it the client has certainly failed.
const SEND_LIMIT = 512 * 1024 * 1024;
const TIME_LIMIT = 20000;
const MODULE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../src/index.js');

/** One unmasked frame, as a server sends it. */
export function frame(payload, { opcode = 0x1, final = true } = {}) {
  const data = Buffer.isBuffer(payload) ? payload : Buffer.from(payload);
  const first = (final ? 0x80 : 0) | opcode;
  let header;
  if (data.length < 126) {
    header = Buffer.from([first, data.length]);
  } else if (data.length < 65536) {
    header = Buffer.from([first, 126, 0, 0]);
    header.writeUInt16BE(data.length, 2);
  } else {
    header = Buffer.alloc(10);
    header[0] = first;
    header[1] = 127;
    header.writeBigUInt64BE(BigInt(data.length), 2);
  }
  return Buffer.concat([header, data]);
}

/**
 * `websocket(socket, record)` writes what follows the handshake and hello; `http(socket, record)`
 * answers any other request.
 */
export class HostileServer {
  constructor({ websocket = null, http = null } = {}) {
    this.websocket = websocket;
    this.http = http;
    this.connections = [];
    this.sockets = new Set();
    this.stopping = false;
    this.server = net.createServer((socket) => this.serve(socket));
  }

  async start() {
    await new Promise((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${this.server.address().port}`;
    return this;
  }

  async stop() {
    this.stopping = true;
    for (const socket of this.sockets) socket.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }

  websockets() {
    return this.connections.filter((c) => c.path.startsWith('/ws'));
  }

  serve(socket) {
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
    socket.on('error', () => {});
    let head = Buffer.alloc(0);
    const onHead = (chunk) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      socket.off('data', onHead);
      const [requestLine, ...lines] = head.subarray(0, end).toString('latin1').split('\r\n');
      const fields = {};
      for (const line of lines) {
        const colon = line.indexOf(':');
        if (colon > 0) fields[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      const record = { path: requestLine.split(' ')[1] ?? '/', opened: Date.now(), sent: 0, closeCode: null };
      this.connections.push(record);
      if (!record.path.startsWith('/ws')) {
        if (this.http) this.http(socket, record);
        else socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      if (!this.websocket) {
        socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      const accept = createHash('sha1').update(fields['sec-websocket-key'] + GUID).digest('base64');
      socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
      socket.write(frame(HELLO));
      this.readClose(socket, record);
      this.websocket(socket, record);
    };
    socket.on('data', onHead);
  }

  /** Reads the client's (masked) frames until its close frame; records the code. */
  readClose(socket, record) {
    let buffer = Buffer.alloc(0);
    socket.on('data', (chunk) => {
      buffer = Buffer.concat([buffer, chunk]);
      while (buffer.length >= 2 && record.closeCode === null) {
        let length = buffer[1] & 0x7f;
        let offset = 2;
        if (length === 126) {
          if (buffer.length < 4) return;
          length = buffer.readUInt16BE(2);
          offset = 4;
        } else if (length === 127) {
          if (buffer.length < 10) return;
          length = Number(buffer.readBigUInt64BE(2));
          offset = 10;
        }
        if (buffer.length < offset + 4 + length) return;
        const key = buffer.subarray(offset, offset + 4);
        const payload = Buffer.from(buffer.subarray(offset + 4, offset + 4 + length).map((byte, i) => byte ^ key[i & 3]));
        const opcode = buffer[0] & 0x0f;
        buffer = buffer.subarray(offset + 4 + length);
        if (opcode === 0x8) record.closeCode = payload.length >= 2 ? payload.readUInt16BE(0) : 1005;
      }
    });
  }

  /** Writes `piece` again and again while the client takes it (bounded in bytes and time). */
  sendWhileTaken(socket, record, piece, { every = 0 } = {}) {
    const deadline = Date.now() + TIME_LIMIT;
    const more = () => {
      while (!this.stopping && !socket.destroyed && record.sent < SEND_LIMIT && Date.now() < deadline) {
        record.sent += piece.length;
        if (every > 0) return setTimeout(() => socket.write(piece, more), every);
        if (!socket.write(piece)) return socket.once('drain', more);
      }
    };
    more();
  }
}

/**
 * Runs `source` in a Node process of its own (so its memory and CPU are its own) with the
 * module as `ringcast`, the server's URL as `URL` and `peakMiB()`, `cpuSeconds()` at hand; the
 * source ends with `report(value)`, which is returned.
 */
export function runClient(source, url, timeout = 60000) {
  const script = `
    import * as ringcast from ${JSON.stringify(MODULE)};
    const URL = ${JSON.stringify(url)};
    const peakMiB = () => process.resourceUsage().maxRSS / 1024;
    const cpuSeconds = () => { const { user, system } = process.cpuUsage(); return (user + system) / 1e6; };
    const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
    const report = (value) => { console.log(JSON.stringify(value)); process.exit(0); };
    ${source}
  `;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
    });
    child.stderr.on('data', (chunk) => {
      err += chunk;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeout);
    child.on('exit', (code) => {
      clearTimeout(timer);
      if (code !== 0) return reject(new Error(`the client exited with ${code}: ${err}`));
      resolve(JSON.parse(out.trim().split('\n').pop()));
    });
  });
}
