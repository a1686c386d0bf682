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
