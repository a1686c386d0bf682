// The whole log tail of a task on its page: loaded from GET api/tasks/{id}/log, then following
// the `log` events (a gap, e.g. after a resync, loads the tail again). It follows new lines until
// the reader pauses it (or scrolls up), and shows only the lines holding what the search box holds.

import { appURL } from './base.js';

const MAX_LINES = 10000; // the most a server keeps (logLines at its highest)

export class LogPanel {
  /**
   * @param {object} o
   * @param {string} o.id   the task
   * @param {HTMLPreElement} o.box  the lines
   * @param {HTMLElement} o.count  "120 lines", "3 of 120 lines match"
   * @param {HTMLElement} o.empty  shown while there is no line
   * @param {HTMLButtonElement} o.follow  pauses and resumes following
   * @param {HTMLInputElement} o.search
   * @param {HTMLButtonElement} o.copy
   */
  constructor({ id, box, count, empty, follow, search, copy }) {
    Object.assign(this, { id, box, countEl: count, empty, followButton: follow, search, copyButton: copy });
    this.lines = [];
    this.end = 0; // the number of the line after the last one held (the task's logCount)
    this.following = true;
    this.query = '';
    this.loading = null;
    follow.addEventListener('click', () => this.setFollowing(!this.following));
    search.addEventListener('input', () => {
      this.query = search.value.trim().toLowerCase();
      this.render();
    });
    search.addEventListener('keydown', (e) => {
      if (e.key === 'Escape' && search.value) {
        e.stopPropagation();
        search.value = '';
        this.query = '';
        this.render();
      }
    });
    copy.addEventListener('click', () => this.copy());
    // Scrolling up to read pauses following; back at the bottom, it follows again.
    box.addEventListener('scroll', () => {
      const atBottom = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
      if (this.programmatic) return;
      if (!atBottom && this.following) this.setFollowing(false);
    }, { passive: true });
  }

  setFollowing(on) {
    this.following = on;
    this.followButton.setAttribute('aria-pressed', String(on));
    this.followButton.textContent = on ? 'Pause follow' : 'Follow';
    this.box.dataset.following = String(on);
    if (on) this.toBottom();
  }

  toBottom() {
    this.programmatic = true;
    this.box.scrollTop = this.box.scrollHeight;
    requestAnimationFrame(() => { this.programmatic = false; });
  }

  load() {
    if (this.loading) return this.loading;
    this.loading = fetch(appURL(`api/tasks/${encodeURIComponent(this.id)}/log`), { headers: { Accept: 'application/json' } })
      .then((r) => (r.ok ? r.json() : null))
      .then((tail) => {
        if (!tail || !Array.isArray(tail.lines)) return;
        this.lines = tail.lines.slice(-MAX_LINES);
        this.end = typeof tail.logCount === 'number' ? tail.logCount : this.lines.length;
        this.render();
      })
      .catch((err) => console.warn(`ringcast: cannot load the log of ${this.id}`, err))
      .finally(() => { this.loading = null; });
    return this.loading;
  }

  /** Lines `from`… arrived (a live `log` event). */
  append(from, lines) {
    if (!Array.isArray(lines)) return;
    if (this.loading) {
      this.loading.then(() => this.append(from, lines));
      return;
    }
    if (typeof from !== 'number' || from > this.end) {
      this.load();
      return;
    }
    const fresh = lines.slice(this.end - from);
    if (!fresh.length) return;
    this.end = from + lines.length;
    this.lines.push(...fresh);
    if (this.lines.length > MAX_LINES) {
      this.lines.splice(0, this.lines.length - MAX_LINES);
      this.render();
      return;
    }
    // The usual case costs one text node, not the whole log written again.
    const shown = this.query ? fresh.filter((l) => l.toLowerCase().includes(this.query)) : fresh;
    if (shown.length) this.box.append(document.createTextNode((this.box.firstChild ? '\n' : '') + shown.join('\n')));
    this.finish(this.query ? this.matches + shown.length : this.lines.length);
  }

  /** The task says it has `count` lines: more than held means some were missed. */
  catchUp(count) {
    if (!this.loading && typeof count === 'number' && count > this.end) this.load();
  }

  render() {
    const shown = this.query ? this.lines.filter((l) => l.toLowerCase().includes(this.query)) : this.lines;
    this.box.textContent = shown.join('\n');
    this.finish(shown.length);
  }

  finish(matches) {
    this.matches = matches;
    const total = this.lines.length;
    const lines = `${total.toLocaleString('en')} line${total === 1 ? '' : 's'}`;
    this.countEl.textContent = this.query ? `${matches.toLocaleString('en')} of ${lines} match` : lines;
    this.box.hidden = total === 0;
    this.empty.hidden = total > 0;
    this.box.dataset.lines = String(this.end);
    if (this.following) this.toBottom();
  }

  async copy() {
    const text = this.lines.join('\n');
    let ok = false;
    try {
      await navigator.clipboard.writeText(text);
      ok = true;
    } catch {
      // Without clipboard permission: select the box, so Ctrl+C takes it.
      const range = document.createRange();
      range.selectNodeContents(this.box);
      const selection = getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
    }
    this.copyButton.textContent = ok ? 'Copied' : 'Selected: press Ctrl+C';
    this.copyButton.dataset.copied = String(ok);
    setTimeout(() => { this.copyButton.textContent = 'Copy log'; }, 2500);
  }
}
