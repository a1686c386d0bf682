// Cards nobody sees (in a chunk the browser skips, or in the collapsed Recent section) are not
// rendered on every change; they are brought up to date in idle time, so assistive technology
// reads current values. Passes go over what was behind when the pass began, and start at most
// once per CATCH_UP_EVERY_MS: a card updated ten times a second is written about once a second
// while nobody sees it, not ten times (and at once when it is shown: the dashboard renders it then).

const IDLE_SLICE_MS = 4; // work per idle callback when the page is busy
const CATCH_UP_EVERY_MS = 1000;

export class IdleCatchUp {
  /**
   * @param {object} o
   * @param {() => number} o.now                          server time now (ms)
   * @param {(id: string, now: number) => void} o.update  brings the card of `id` up to date
   */
  constructor({ now, update }) {
    this.now = now;
    this.update = update;
    this.behind = new Set(); // ids whose card is off screen and behind the store
    this.catching = new Set(); // the pass under way: what was behind when it began
    this.handle = 0;
    this.wait = 0; // a timer until the next pass may start
    this.notBefore = 0;
    this.idle = this.idle.bind(this);
  }

  /** The card of `id` is off screen and no longer shows its task's latest state. */
  fellBehind(id) {
    if (!this.catching.has(id)) this.behind.add(id);
    this.schedule();
  }

  /** The card of `id` shows its task's latest state, or is gone. */
  caughtUp(id) {
    this.behind.delete(id);
    this.catching.delete(id);
  }

  schedule() {
    if (this.handle || this.wait) return;
    if (!this.catching.size) {
      if (!this.behind.size) return;
      const wait = this.notBefore - performance.now();
      if (wait > 0) {
        this.wait = setTimeout(() => {
          this.wait = 0;
          this.schedule();
        }, wait);
        return;
      }
      [this.catching, this.behind] = [this.behind, this.catching];
    }
    const ric = window.requestIdleCallback
      || ((cb) => setTimeout(() => cb({ didTimeout: true, timeRemaining: () => 0 }), 250));
    this.handle = ric(this.idle, { timeout: 1000 });
  }

  idle(deadline) {
    this.handle = 0;
    const start = performance.now();
    const now = this.now();
    for (const id of this.catching) {
      if (deadline.timeRemaining() < 1 && performance.now() - start > IDLE_SLICE_MS) break;
      this.catching.delete(id);
      this.update(id, now);
    }
    // A pass that finished waits before the next begins; one cut short goes on in the next idle time.
    if (!this.catching.size) this.notBefore = performance.now() + CATCH_UP_EVERY_MS;
    this.schedule();
  }
}
