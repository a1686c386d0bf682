// The two DOM helpers every view here uses: make an element, and write only what changed.

export function el(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text != null) e.textContent = text;
  return e;
}

/** Calls `apply(value)` unless `value` is what was written last under `key` (skips unchanged DOM writes). */
export function write(last, key, value, apply) {
  if (last[key] === value) return;
  last[key] = value;
  apply(value);
}

// C0 and C1 controls and the bidirectional marks, embeddings, overrides and isolates: characters
// that change how the text around them reads without showing themselves.
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is what this pattern is for
const HIDDEN = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/gu;

/** A task's link as a page may show it: `{href, text}` for an http or https URL with no user
 *  before its host, in the URL parser's own form (non-ASCII percent-encoded, hosts in punycode)
 *  and with no hidden character left; null for anything else. The server refuses the rest, but
 *  state restored from an older version, or another server, is shown through here too. */
export function safeLink(url) {
  let u;
  try {
    u = new URL(url);
  } catch {
    return null;
  }
  if ((u.protocol !== 'http:' && u.protocol !== 'https:') || u.username || u.password || !u.host) return null;
  const href = u.href.replace(HIDDEN, '');
  return { href, text: href };
}
