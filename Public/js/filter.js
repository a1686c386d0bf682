// The search filter over the cards: with a query, a card is shown when its task's id or title
// holds every word of it, or a task above or below it does (families stay together).

import { matches, searchTerms } from './search.js';

export class Filter {
  /** @param {import('./family.js').Family} family */
  constructor(family) {
    this.family = family;
    this.terms = [];
    this.query = '';
    this.test = (t) => matches(t, this.terms);
  }

  get active() {
    return this.terms.length > 0;
  }

  /** Takes a new query; returns whether what it filters by changed (its words, not its spacing). */
  set(query) {
    const terms = searchTerms(query);
    if (terms.join(' ') === this.terms.join(' ')) return false;
    this.terms = terms;
    this.query = query.trim();
    return true;
  }

  passes(task) {
    if (!this.terms.length || this.test(task)) return true;
    return this.family.someBelow(task.id, this.test) || this.family.someAbove(task, this.test);
  }
}
