// The rate sparkline in the head of each running card: the rates every event carries are kept
// per task (spark.js), and a card's line is redrawn when its samples changed, at most once per
// SPARK_EVERY_MS (SPARK_EVERY_REDUCED_MS under prefers-reduced-motion); a change that comes
// sooner is drawn when that time is up.

import { RateHistory, createSpark, drawSpark, sparkPaths } from './spark.js';
import { write } from './dom.js';

const SPARK_EVERY_MS = 1000;
const SPARK_EVERY_REDUCED_MS = 5000;

export class Sparklines {
  /** @param {(id: string) => void} rerender  the card of `id` must be rendered again (its line is due) */
  constructor(rerender) {
    this.rerender = rerender;
    this.rates = new RateHistory();
    this.waiting = new Set();
    this.timer = 0;
    this.reducedMotion = matchMedia('(prefers-reduced-motion: reduce)');
  }

  /** Keeps a running task's rate at server time `t` (ms). */
  record(id, rate, t) {
    this.rates.record(id, rate, t);
  }

  /** The task finished or is gone: its history goes too. */
  forget(id) {
    this.rates.delete(id);
  }

  /** Redraws the card's sparkline when its samples changed and it is due; `wanted`: the card shows one. */
  update(card, wanted) {
    const version = wanted ? this.rates.version(card.id) : -1;
    if (version === card.sparkVersion) return;
    const t = performance.now();
    const every = this.reducedMotion.matches ? SPARK_EVERY_REDUCED_MS : SPARK_EVERY_MS;
    if (version >= 0 && card.sparkDrawn && t - card.sparkAt < every) {
      this.later(card.id, every - (t - card.sparkAt));
      return;
    }
    card.sparkVersion = version;
    const paths = version >= 0 ? sparkPaths(this.rates.history(card.id)) : null;
    card.sparkDrawn = !!paths;
    if (paths) {
      if (!card.spark) {
        card.spark = createSpark();
        card.head.append(card.spark.el);
      }
      drawSpark(card.spark, paths);
      card.sparkAt = t;
    }
    if (card.spark) write(card.last, 'spark', !!paths, (on) => { card.spark.el.classList.toggle('off', !on); });
  }

  later(id, delay) {
    this.waiting.add(id);
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = 0;
      const ids = [...this.waiting];
      this.waiting.clear();
      for (const w of ids) this.rerender(w);
    }, Math.max(16, delay));
  }
}
