// What this page may do, as the server says it (GET api/session): whom it is signed in as, and
// the id patterns it may read and publish. The dashboard shows Cancel and Pause only on tasks the
// grant may publish; no DOM here, so the widget may load it too (controls.js imports it).

/** Until the server answers, the page may publish nothing: no button promises what it cannot do. */
let grant = { signedIn: false, name: '', kind: 'anonymous', read: [], publish: [] };

/** `*` any run of characters (dots included), `?` one: the server's id patterns (docs/PROTOCOL.md). */
export function globMatches(pattern, id) {
  let p = 0;
  let t = 0;
  let star = -1;
  let mark = 0;
  while (t < id.length) {
    if (p < pattern.length && (pattern[p] === '?' || pattern[p] === id[t])) {
      p++;
      t++;
    } else if (p < pattern.length && pattern[p] === '*') {
      star = p++;
      mark = t;
    } else if (star >= 0) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.length && pattern[p] === '*') p++;
  return p === pattern.length;
}

export function currentGrant() {
  return grant;
}

export function setGrant(next) {
  grant = {
    signedIn: !!next.signedIn,
    name: String(next.name || ''),
    kind: String(next.kind || 'anonymous'),
    read: Array.isArray(next.read) ? next.read : [],
    publish: Array.isArray(next.publish) ? next.publish : [],
  };
}

/** Whether the page's grant may publish task `id` (and so ask its publisher to cancel or pause it). */
export function mayPublish(id) {
  return grant.publish.some((pattern) => globMatches(pattern, id));
}
