// The log tail of an expanded card: a monospace box that loads the task's last lines from the
// server (GET api/tasks/{id}/log), then follows the `log` events (each says from which line on
// its lines come, so a gap, e.g. after a resync, is noticed and the tail loaded again). It stays
// at the bottom while the reader is there, and holds still when they scrolled up to read.

import { appURL } from './base.js';

const MAX_LINES = 1000; // lines kept in the box; the server keeps `logLines` (100 by default)

export class LogView {
  /** @param {HTMLElement} box  the <pre> to fill; @param {string} id  the task */
  constructor(box, id) {
    this.box = box;
    this.id = id;
    this.lines = [];
    this.end = 0; // the number of the line after the last one shown (the task's logCount)
    this.loading = null;
    this.closed = false;
  }

  /** Loads the tail; events that arrive meanwhile are applied after it. */
  load() {
    if (this.loading) return this.loading;
    const url = appURL(`api/tasks/${encodeURIComponent(this.id)}/log`);
    this.loading = fetch(url, { headers: { Accept: 'application/json' } })
      .then((r) => (r.ok ? r.json() : null))
      .then((tail) => {
        if (this.closed || !tail || !Array.isArray(tail.lines)) return;
        this.lines = tail.lines.slice(-MAX_LINES);
        this.end = typeof tail.logCount === 'number' ? tail.logCount : this.lines.length;
        this.show(true);
      })
      .catch((err) => console.warn(`ringcast: cannot load the log of ${this.id}`, err))
      .finally(() => { this.loading = null; });
    return this.loading;
  }

  /** Lines `from`… arrived (a live `log` event). */
  append(from, lines) {
    if (this.closed || !Array.isArray(lines)) return;
    if (this.loading) {
      this.loading.then(() => this.append(from, lines));
      return;
    }
    if (typeof from !== 'number' || from > this.end) {
      this.load(); // lines were missed: take the tail again
      return;
    }
    const fresh = lines.slice(this.end - from);
    if (!fresh.length) return;
    this.lines.push(...fresh);
    if (this.lines.length > MAX_LINES) this.lines.splice(0, this.lines.length - MAX_LINES);
    this.end = from + lines.length;
    this.show(false);
  }

  /** The task says it has `count` lines: more than shown means some were missed. */
  catchUp(count) {
    if (!this.closed && !this.loading && typeof count === 'number' && count > this.end) this.load();
  }

  show(first) {
    const box = this.box;
    const atBottom = first || box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
    box.textContent = this.lines.join('\n');
    box.hidden = this.lines.length === 0;
    if (atBottom) box.scrollTop = box.scrollHeight;
    box.dataset.lines = String(this.end);
  }

  close() {
    this.closed = true;
    this.lines = [];
    this.box.textContent = '';
    this.box.hidden = true;
  }
}
