// Where a client's server is, from the URL it was given: the one place a URL is read.

import { RingcastError } from './fields.js';

export const DEFAULT_URL = 'http://127.0.0.1:8080';

/** Where the server is: `http://HOST:PORT` (or https, ws, wss); a path is kept as a prefix. */
export function endpoint(url) {
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    parsed = null;
  }
  if (!parsed || !['http:', 'https:', 'ws:', 'wss:'].includes(parsed.protocol) || !parsed.hostname) {
    throw new RingcastError('invalid_url', `'${url}' is not a server URL: use http://HOST:PORT`, { field: 'url' });
  }
  const secure = parsed.protocol === 'https:' || parsed.protocol === 'wss:';
  let path = parsed.pathname.replace(/\/+$/, '');
  if (path.endsWith('/ws')) path = path.slice(0, -3);
  return {
    url,
    secure,
    host: parsed.hostname.replace(/^\[|\]$/g, ''),
    port: Number(parsed.port) || (secure ? 443 : 80),
    basePath: path,
    http: `${secure ? 'https' : 'http'}://${parsed.host}${path}`,
  };
}
