// A small RFC 6455 WebSocket client over node:net and node:tls: what the publisher needs and
// nothing more. Text frames out (masked, as a client must), text frames in (fragments put
// together), ping answered with pong, close answered and reported. Node 18 and 20 have no
// WebSocket without a flag, so the module brings its own rather than depend on one.

import { createHash, randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import net from 'node:net';
import tls from 'node:tls';

const ACCEPT_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
const MAX_MESSAGE = 16 * 1024 * 1024;
const MAX_HEADER = 64 * 1024;

/** The server answered the upgrade with an HTTP status other than 101; `body` is its answer. */
export class HandshakeRefused extends Error {
  constructor(status, body) {
    super(`the server refused the WebSocket upgrade with HTTP ${status}: ${body.slice(0, 300)}`);
    this.status = status;
    this.body = body;
  }
}

function frame(opcode, payload) {
  const length = payload.length;
  let header;
  if (length < 126) {
    header = Buffer.from([0x80 | opcode, 0x80 | length]);
  } else if (length < 65536) {
    header = Buffer.alloc(4);
    header[0] = 0x80 | opcode;
    header[1] = 0x80 | 126;
    header.writeUInt16BE(length, 2);
  } else {
    header = Buffer.alloc(10);
    header[0] = 0x80 | opcode;
    header[1] = 0x80 | 127;
    header.writeBigUInt64BE(BigInt(length), 2);
  }
  const key = randomBytes(4);
  const masked = Buffer.allocUnsafe(length);
  for (let i = 0; i < length; i++) masked[i] = payload[i] ^ key[i & 3];
  return Buffer.concat([header, key, masked]);
}

/**
 * An open connection: emits 'message' (text) and 'close' ({code, reason}) once.
 * Make one with connect().
 */
export class WebSocketConnection extends EventEmitter {
  constructor(socket, buffered) {
    super();
    this.socket = socket;
    this.buffer = buffered;
    this.fragments = [];
    this.fragmentOpcode = null;
    this.closed = false;
    socket.on('data', (chunk) => {
      this.buffer = this.buffer.length ? Buffer.concat([this.buffer, chunk]) : chunk;
      this.parse();
    });
    socket.on('close', () => this.finish(1006, 'the server went away'));
    socket.on('error', (error) => this.finish(1006, error.message));
    // What arrived with the handshake's answer.
    setImmediate(() => this.parse());
  }

  send(text) {
    if (!this.closed) this.socket.write(frame(0x1, Buffer.from(text, 'utf8')));
  }

  close(code = 1000) {
    if (this.closed) return;
    const payload = Buffer.alloc(2);
    payload.writeUInt16BE(code);
    try {
      this.socket.write(frame(0x8, payload));
    } catch {
      // already gone
    }
    this.socket.end();
    this.finish(code, '');
  }

  ref() {
    this.socket.ref();
  }

  unref() {
    this.socket.unref();
  }

  finish(code, reason) {
    if (this.closed) return;
    this.closed = true;
    this.socket.destroy();
    this.emit('close', { code, reason });
  }

  parse() {
    while (!this.closed && this.buffer.length >= 2) {
      const buffer = this.buffer;
      const first = buffer[0];
      const second = buffer[1];
      let length = second & 0x7f;
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
      if (length > MAX_MESSAGE) return this.close(1009);
      let key = null;
      if (second & 0x80) {
        if (buffer.length < offset + 4) return;
        key = buffer.subarray(offset, offset + 4);
        offset += 4;
      }
      if (buffer.length < offset + length) return;
      let payload = buffer.subarray(offset, offset + length);
      this.buffer = buffer.subarray(offset + length);
      if (key) payload = Buffer.from(payload.map((byte, i) => byte ^ key[i & 3]));
      const opcode = first & 0x0f;
      const final = (first & 0x80) !== 0;
      if (opcode === 0x9) {
        this.socket.write(frame(0xa, payload));
      } else if (opcode === 0x8) {
        const code = payload.length >= 2 ? payload.readUInt16BE(0) : 1005;
        this.close(code);
        this.finish(code, payload.subarray(2).toString('utf8'));
      } else if (opcode === 0x1 || opcode === 0x2 || (opcode === 0x0 && this.fragmentOpcode !== null)) {
        if (opcode !== 0x0) {
          this.fragmentOpcode = opcode;
          this.fragments = [];
        }
        this.fragments.push(Buffer.from(payload));
        if (final) {
          const whole = Buffer.concat(this.fragments);
          const text = this.fragmentOpcode === 0x1;
          this.fragments = [];
          this.fragmentOpcode = null;
          if (text) this.emit('message', whole.toString('utf8'));
        }
      }
    }
  }
}

/**
 * Opens the TCP (and TLS) connection and upgrades it. Rejects with an Error (HandshakeRefused for
 * an HTTP answer other than 101) within `timeout` milliseconds.
 */
export function connect({ host, port, path, secure, headers = [], timeout = 10000, tlsOptions = {} }) {
  return new Promise((resolve, reject) => {
    const socket = secure ? tls.connect({ host, port, servername: host, ...tlsOptions }) : net.connect({ host, port });
    socket.setNoDelay(true);
    const key = randomBytes(16).toString('base64');
    let head = Buffer.alloc(0);
    const timer = setTimeout(() => fail(new Error(`no WebSocket handshake from ${host}:${port} within ${timeout} ms`)), timeout);
    function fail(error) {
      clearTimeout(timer);
      socket.destroy();
      reject(error);
    }
    socket.once('error', fail);
    socket.once(secure ? 'secureConnect' : 'connect', () => {
      const hostHeader = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
      const lines = [
        `GET ${path} HTTP/1.1`,
        `Host: ${hostHeader}`,
        'Upgrade: websocket',
        'Connection: Upgrade',
        `Sec-WebSocket-Key: ${key}`,
        'Sec-WebSocket-Version: 13',
        ...headers.map(([name, value]) => `${name}: ${value}`),
      ];
      socket.write(`${lines.join('\r\n')}\r\n\r\n`);
    });
    function onData(chunk) {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (head.length > MAX_HEADER) fail(new Error('the server\u2019s handshake answer has no end of headers'));
        return;
      }
      const text = head.subarray(0, end).toString('latin1');
      const rest = head.subarray(end + 4);
      const [statusLine, ...headerLines] = text.split('\r\n');
      const status = Number(statusLine.split(' ')[1]);
      const fields = {};
      for (const line of headerLines) {
        const colon = line.indexOf(':');
        if (colon > 0) fields[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      if (status !== 101) {
        const wanted = Number(fields['content-length'] || 0);
        if (rest.length < Math.min(wanted, MAX_HEADER)) return; // the error body is still on its way
        socket.off('data', onData);
        return fail(new HandshakeRefused(status, rest.toString('utf8')));
      }
      const expected = createHash('sha1').update(key + ACCEPT_GUID).digest('base64');
      socket.off('data', onData);
      if (fields['sec-websocket-accept'] !== expected) return fail(new Error('the server\u2019s WebSocket handshake did not accept our key'));
      clearTimeout(timer);
      socket.off('error', fail);
      resolve(new WebSocketConnection(socket, rest));
    }
    socket.on('data', onData);
  });
}
