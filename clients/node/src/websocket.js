// A small RFC 6455 WebSocket client over node:net and node:tls: what the publisher needs and
// nothing more. Text frames out (masked, as a client must), text frames in (fragments put
// together), ping answered with pong, close answered and reported. Node 18 and 20 have no
// WebSocket without a flag, so the module brings its own rather than depend on one.
//
// The server is not trusted with the client's memory: a message (all its fragments together)
// over MAX_MESSAGE bytes, or in more than MAX_FRAGMENTS frames, ends the connection with 1009
// before its bytes are kept; a frame RFC 6455 forbids a server to send, with 1002; text that is
// not UTF-8, with 1007. The 'close' event then says `violation: true`.

import { createHash, randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import net from 'node:net';
import tls from 'node:tls';
import { serverIdentity, tunnel } from './proxy.js';

const ACCEPT_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
export const MAX_MESSAGE = 16 * 1024 * 1024;
export const MAX_FRAGMENTS = 4096;
const MAX_HEADER = 64 * 1024;
// Pongs waiting to be written, past which pings go unanswered (RFC 6455 5.5.3 lets a pong answer
// only the latest): a server that pings and never reads would have them queue here without end.
const MAX_UNSENT = 1024 * 1024;
const UTF8 = new TextDecoder('utf-8', { fatal: true });

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
 * An open connection: emits 'message' (text) and 'close' ({code, reason, violation}) once.
 * Make one with connect().
 */
export class WebSocketConnection extends EventEmitter {
  constructor(socket, buffered) {
    super();
    this.socket = socket;
    this.buffer = buffered;
    // Chunks that cannot finish a frame yet wait here and are joined once, when one can: joining
    // at every chunk copied a large frame over and over.
    this.waiting = [];
    this.waitingBytes = 0;
    this.needed = 2;
    this.fragments = [];
    this.fragmentBytes = 0;
    this.fragmentOpcode = null;
    this.closed = false;
    socket.on('data', (chunk) => {
      this.waiting.push(chunk);
      this.waitingBytes += chunk.length;
      if (this.buffer.length + this.waitingBytes < this.needed) return;
      this.buffer = this.buffer.length === 0 && this.waiting.length === 1 ? chunk : Buffer.concat([this.buffer, ...this.waiting]);
      this.waiting = [];
      this.waitingBytes = 0;
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

  /** Sends a close frame with `code` and ends the connection; `violation` when the server broke a rule. */
  close(code = 1000, reason = '', violation = false) {
    if (this.closed) return;
    const payload = Buffer.alloc(2);
    payload.writeUInt16BE(code);
    try {
      this.socket.write(frame(0x8, payload));
    } catch {
      // already gone
    }
    this.socket.end();
    this.finish(code, reason, violation);
  }

  ref() {
    this.socket.ref();
  }

  unref() {
    this.socket.unref();
  }

  finish(code, reason, violation = false) {
    if (this.closed) return;
    this.closed = true;
    // What a message held goes now, not when the connection object does.
    this.fragments = [];
    this.waiting = [];
    this.buffer = Buffer.alloc(0);
    this.socket.destroy();
    this.emit('close', { code, reason, violation });
  }

  /** A reason to refuse the frame whose header this is (RFC 6455 5.1-5.5), or null. */
  refusal(first, second, opcode, final, length) {
    if (second & 0x80) return [1002, 'the server sent a masked frame'];
    if (first & 0x70) return [1002, 'the server sent a frame with reserved bits set'];
    if (opcode >= 0x8) {
      if (opcode !== 0x8 && opcode !== 0x9 && opcode !== 0xa) return [1002, `the server sent a frame of unknown opcode ${opcode}`];
      if (!final || length > 125) return [1002, 'the server sent a fragmented or over-long control frame'];
      return null;
    }
    if (opcode > 0x2) return [1002, `the server sent a frame of unknown opcode ${opcode}`];
    const continuing = opcode === 0x0;
    if (continuing !== (this.fragmentOpcode !== null)) {
      return [1002, continuing ? 'the server sent a continuation frame with no message begun' : 'the server began a message before it finished the one before'];
    }
    if ((continuing ? this.fragmentBytes : 0) + length > MAX_MESSAGE) return [1009, `the server sent a message of more than ${MAX_MESSAGE / 1048576} MiB (the client\u2019s limit)`];
    if (continuing && this.fragments.length >= MAX_FRAGMENTS) return [1009, `the server sent a message in more than ${MAX_FRAGMENTS} fragments (the client\u2019s limit)`];
    return null;
  }

  parse() {
    while (!this.closed) {
      const buffer = this.buffer;
      this.needed = 2;
      if (buffer.length < 2) return;
      const first = buffer[0];
      const second = buffer[1];
      const opcode = first & 0x0f;
      const final = (first & 0x80) !== 0;
      let length = second & 0x7f;
      let offset = 2;
      if (length === 126) {
        this.needed = 4;
        if (buffer.length < 4) return;
        length = buffer.readUInt16BE(2);
        offset = 4;
      } else if (length === 127) {
        this.needed = 10;
        if (buffer.length < 10) return;
        length = Number(buffer.readBigUInt64BE(2));
        offset = 10;
      }
      // Judged from the header alone, before the payload is read and kept.
      const refused = this.refusal(first, second, opcode, final, length);
      if (refused) return this.close(refused[0], refused[1], true);
      this.needed = offset + length;
      if (buffer.length < offset + length) return;
      const payload = buffer.subarray(offset, offset + length);
      this.buffer = buffer.subarray(offset + length);
      if (opcode === 0x9) {
        if (this.socket.writableLength < MAX_UNSENT) this.socket.write(frame(0xa, payload));
      } else if (opcode === 0x8) {
        const code = payload.length >= 2 ? payload.readUInt16BE(0) : 1005;
        this.close(code, payload.subarray(2).toString('utf8'));
      } else if (opcode !== 0xa) {
        if (opcode !== 0x0) {
          this.fragmentOpcode = opcode;
          this.fragments = [];
          this.fragmentBytes = 0;
        }
        this.fragments.push(Buffer.from(payload));
        this.fragmentBytes += length;
        if (final) {
          const whole = this.fragments.length === 1 ? this.fragments[0] : Buffer.concat(this.fragments);
          const text = this.fragmentOpcode === 0x1;
          this.fragments = [];
          this.fragmentBytes = 0;
          this.fragmentOpcode = null;
          if (text) {
            let decoded;
            try {
              decoded = UTF8.decode(whole);
            } catch {
              return this.close(1007, 'the server sent a text message that is not UTF-8', true);
            }
            this.emit('message', decoded);
          }
        }
      }
    }
  }
}

/**
 * Opens the TCP (and TLS) connection, through `proxy`'s CONNECT tunnel when one is given (see
 * proxy.js), and upgrades it. Rejects with an Error (HandshakeRefused for an HTTP answer other
 * than 101) within `timeout` milliseconds, the tunnel's CONNECT included.
 */
export function connect({ host, port, path, secure, headers = [], timeout = 10000, tlsOptions = {}, proxy = null }) {
  if (!proxy) {
    const socket = secure ? tls.connect({ port, ...serverIdentity(host), ...tlsOptions }) : net.connect({ host, port });
    return upgrade(socket, false, { host, port, path, secure, headers, timeout });
  }
  const started = Date.now();
  return tunnel(proxy, host, port, timeout).then((raw) => {
    const socket = secure ? tls.connect({ socket: raw, ...serverIdentity(host), ...tlsOptions }) : raw;
    return upgrade(socket, !secure, { host, port, path, secure, headers, timeout: Math.max(1, timeout - (Date.now() - started)) });
  });
}

/** The upgrade on `socket`, once it connects (at once when `ready`: a tunnel already did). */
function upgrade(socket, ready, { host, port, path, secure, headers, timeout }) {
  return new Promise((resolve, reject) => {
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
    const send = () => {
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
    };
    if (ready) send();
    else socket.once(secure ? 'secureConnect' : 'connect', send);
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
