// The splash: the logo revealed by a growing circular mask with a gentle bounce (style.css), shown
// from page load until the first snapshot, then shrunk and faded into the dashboard.

const MIN_SHOW_MS = 900; // long enough for the reveal to finish
const MIN_SHOW_REDUCED_MS = 300;
const FALLBACK_MS = 1200;

export class Splash {
  constructor(el) {
    this.el = el;
    this.started = performance.now();
    this.finished = false;
  }

  finish() {
    if (this.finished || !this.el) return;
    this.finished = true;
    const reduced = matchMedia('(prefers-reduced-motion: reduce)').matches;
    const wait = Math.max(0, (reduced ? MIN_SHOW_REDUCED_MS : MIN_SHOW_MS) - (performance.now() - this.started));
    setTimeout(() => this.leave(), wait);
  }

  leave() {
    const el = this.el;
    let gone = false;
    const end = () => {
      if (gone) return;
      gone = true;
      el.hidden = true;
      el.remove();
    };
    el.addEventListener('animationend', (e) => { if (e.target === el) end(); });
    setTimeout(end, FALLBACK_MS);
    el.classList.add('leaving');
    if (document.hidden) end();
  }
}
