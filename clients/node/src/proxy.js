// Which HTTP proxy carries a connection to the server, and the tunnel through it.
//
// The environment is read as curl, `requests` and `proxy-from-env` read it: `https_proxy` /
// `HTTPS_PROXY` for https:// and wss:// servers, `http_proxy` / `HTTP_PROXY` for http:// and ws://
// (lower case first), unless `no_proxy` / `NO_PROXY` names the host: a comma list of hosts or
// domain suffixes (`example.com` and `.example.com` both cover `ci.example.com`), each with an
// optional `:port`, or `*` for all. A client's `proxy` option overrides the environment.
//
// Every connection through a proxy is an HTTP CONNECT tunnel (as `https-proxy-agent` opens),
// plain http:// too: the WebSocket needs one anyway, and one way through keeps the HTTP reads and
// the WebSocket alike. TLS to the server runs inside the tunnel, verified against its own name.

import http from 'node:http';
import net from 'node:net';
import { Readable } from 'node:stream';
import tls from 'node:tls';
import { RingcastError } from './fields.js';

/** A proxy URL as the client uses it: `{url, host, port, authorization}`; throws RingcastError when it is not http://. */
export function parseProxy(text) {
  let parsed = null;
  try {
    parsed = new URL(text.includes('://') ? text : `http://${text}`);
  } catch {
    parsed = null;
  }
  if (!parsed || parsed.protocol !== 'http:' || !parsed.hostname) {
    throw new RingcastError('invalid_proxy', `'${text}' is not an HTTP proxy URL: use http://HOST:PORT`, { field: 'proxy' });
  }
  const host = parsed.hostname.replace(/^\[|\]$/g, '');
  const port = Number(parsed.port) || 80;
  const authorization = parsed.username
    ? `Basic ${Buffer.from(`${decodeURIComponent(parsed.username)}:${decodeURIComponent(parsed.password)}`).toString('base64')}`
    : null;
  return { url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`, host, port, authorization };
}

/**
 * tls.connect's options naming the server: its name for SNI, and `host`, which the certificate is
 * checked against; an IP address is sent no SNI (RFC 6066 forbids it) but is still checked.
 */
export function serverIdentity(host) {
  return net.isIP(host) ? { host } : { host, servername: host };
}

function variable(name, env) {
  return env[name.toLowerCase()] ?? env[name.toUpperCase()] ?? '';
}

/** Whether NO_PROXY's `list` sends `host:port` direct. */
export function bypassed(list, host, port) {
  const name = host.toLowerCase().replace(/\.$/, '');
  for (let entry of list.split(',')) {
    entry = entry.trim().toLowerCase();
    if (!entry) continue;
    if (entry === '*') return true;
    let entryPort = null;
    const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry);
    if (bracketed) {
      entry = bracketed[1];
      entryPort = bracketed[2] ?? null;
    } else {
      const colon = entry.lastIndexOf(':');
      // One colon is a port; more are an IPv6 address without one.
      if (colon > 0 && entry.indexOf(':') === colon && /^\d+$/.test(entry.slice(colon + 1))) {
        entryPort = entry.slice(colon + 1);
        entry = entry.slice(0, colon);
      }
    }
    if (entryPort !== null && Number(entryPort) !== port) continue;
    entry = entry.replace(/^\*?\./, '').replace(/\.$/, '');
    if (name === entry || name.endsWith(`.${entry}`)) return true;
  }
  return false;
}

/**
 * The proxy for a server (`{secure, host, port}`): `option` when it was given (null or '':
 * direct), else the environment's for the scheme unless NO_PROXY names the host; null for direct.
 */
export function chooseProxy(option, { secure, host, port }, env = process.env) {
  if (option !== undefined) return option ? parseProxy(option) : null;
  const url = variable(secure ? 'https_proxy' : 'http_proxy', env);
  if (!url) return null;
  if (bypassed(variable('no_proxy', env), host, port)) return null;
  return parseProxy(url);
}

/**
 * A socket to the proxy on which CONNECT `host:port` succeeded: what follows is the server's.
 * Rejects with an Error naming the proxy when it cannot be reached, refuses (with its status) or
 * does not answer within `timeout` ms.
 */
export function tunnel(proxy, host, port, timeout) {
  const target = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
  return new Promise((resolve, reject) => {
    const headers = { host: target };
    if (proxy.authorization) headers['proxy-authorization'] = proxy.authorization;
    const request = http.request({ host: proxy.host, port: proxy.port, method: 'CONNECT', path: target, headers, agent: false });
    const timer = setTimeout(() => fail(new Error(`the proxy ${proxy.url} did not answer CONNECT ${target} within ${timeout} ms`)), timeout);
    let settled = false;
    function fail(error, socket) {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket?.destroy();
      request.destroy();
      reject(error);
    }
    function refused(status, message, socket) {
      fail(new Error(`the proxy ${proxy.url} refused CONNECT ${target} with HTTP ${status}${message ? ` ${message}` : ''}; does it allow CONNECT to that port (or should NO_PROXY name the host)?`), socket);
    }
    request.once('connect', (answer, socket, head) => {
      if (answer.statusCode < 200 || answer.statusCode >= 300) return refused(answer.statusCode, answer.statusMessage, socket);
      if (settled) return socket.destroy();
      settled = true;
      clearTimeout(timer);
      // Bytes of the server's that came with the proxy's answer go back for the next reader.
      if (head?.length) socket.unshift(head);
      resolve(socket);
    });
    // Node reports some refusals as an ordinary answer rather than 'connect'.
    request.once('response', (answer) => {
      answer.resume();
      refused(answer.statusCode, answer.statusMessage, answer.socket);
    });
    request.once('error', (error) => fail(new Error(`could not reach the proxy ${proxy.url}: ${error.message}`)));
    request.end();
  });
}

/**
 * fetch()'s part for a server behind `proxy` (Node's fetch takes no proxy without undici's
 * dispatcher, which is not Node's to import): one request over a fresh tunnel, answered as a web
 * Response so the caller reads it as it reads fetch's. `signal` ends it, the tunnel included.
 */
export async function fetchThrough(proxy, { secure, host, port }, target, { method, headers, body, signal, timeout, tlsOptions = {} }) {
  const raw = await tunnel(proxy, host, port, timeout);
  if (signal.aborted) {
    raw.destroy();
    throw signal.reason;
  }
  const socket = secure ? tls.connect({ socket: raw, ...serverIdentity(host), ...tlsOptions }) : raw;
  return new Promise((resolve, reject) => {
    const hostHeader = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
    const request = http.request({
      method,
      path: target,
      headers: { ...headers, host: hostHeader, connection: 'close' },
      createConnection: () => socket,
      signal,
    });
    request.once('error', (error) => {
      socket.destroy();
      reject(error);
    });
    request.once('response', (answer) => {
      const fields = new Headers();
      for (const [name, value] of Object.entries(answer.headers)) {
        for (const one of [value].flat()) fields.append(name, one);
      }
      const empty = [204, 205, 304].includes(answer.statusCode) || method === 'HEAD';
      if (empty) answer.resume();
      resolve(new Response(empty ? null : Readable.toWeb(answer), { status: answer.statusCode, statusText: answer.statusMessage, headers: fields }));
    });
    request.end(body);
  });
}
