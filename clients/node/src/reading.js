// Reading back over HTTP (`get`, `readLog`): one request, bounded in time and size, its answer
// decoded or turned into a RingcastError that says what to do.

import { RingcastError } from './fields.js';
import { fetchThrough } from './proxy.js';
import { MAX_MESSAGE } from './websocket.js';

/** The deepest nesting of JSON the client parses from its server. */
export const MAX_DEPTH = 100;
/** The most of an HTTP answer the client reads (a task and its log tail are kilobytes). */
export const MAX_ANSWER = MAX_MESSAGE;

/** Whether `text` nests arrays and objects deeper than `limit` (brackets inside strings do not count). */
export function nestedDeeper(text, limit) {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > limit) return true;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return false;
}

/** The body of `answer` as text, at most MAX_ANSWER bytes (RingcastError `answer_too_large` past it). */
async function readAnswer(answer, tooLarge) {
  const length = Number(answer.headers.get('content-length'));
  if (length > MAX_ANSWER) {
    await answer.body?.cancel().catch(() => {});
    throw tooLarge();
  }
  if (!answer.body) return '';
  const parts = [];
  let size = 0;
  const reader = answer.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > MAX_ANSWER) {
      await reader.cancel().catch(() => {});
      throw tooLarge();
    }
    parts.push(value);
  }
  return Buffer.concat(parts).toString('utf8');
}

/**
 * One HTTP request of `client` (its url, endpoint, token, timeout, proxy and tlsOptions), over
 * within `timeout` ms of the call (the answer's head and body together); rejects with
 * RingcastError: the server's error body, `timeout`, `answer_too_large` past MAX_ANSWER (16 MiB),
 * or `unreachable`.
 */
export async function request(client, method, path, body) {
  const { url, endpoint, token, timeout, proxy, tlsOptions } = client;
  const headers = { accept: 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const signal = AbortSignal.timeout(timeout);
  const where = `${method} ${endpoint.basePath}${path}`;
  const failed = (error) => {
    if (error instanceof RingcastError) return error;
    if (signal.aborted) return new RingcastError('timeout', `${url} did not answer ${where} within ${timeout} ms; is it a Ringcast server, and is it up?`);
    if (proxy) return new RingcastError('unreachable', `could not reach ${url} through the proxy ${proxy.url}: ${error.cause?.message ?? error.message}`);
    return new RingcastError('unreachable', `could not reach ${url}: ${error.cause?.message ?? error.message}; is \`ringcast serve\` running there?`);
  };
  let answer;
  let text;
  try {
    const init = { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal };
    answer = proxy
      ? await fetchThrough(proxy, endpoint, endpoint.basePath + path, { ...init, timeout, tlsOptions })
      : await fetch(endpoint.http + path, init);
    text = await readAnswer(answer, () => new RingcastError('answer_too_large', `${url} answered ${where} with more than ${MAX_ANSWER / 1048576} MiB (the client\u2019s limit); is it a Ringcast server?`, { status: answer.status }));
  } catch (error) {
    throw failed(error);
  }
  let decoded = null;
  try {
    decoded = text ? JSON.parse(text) : null;
  } catch {
    decoded = text;
  }
  if (answer.status >= 400) throw RingcastError.fromAnswer(decoded, answer.status);
  return decoded;
}
