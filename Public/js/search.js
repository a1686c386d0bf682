// The search box: filters the cards by id and title as you type, and keeps the query in the URL
// (`?q=`, beside `?watch=`, with history.replaceState) so a filtered view can be shared or
// reloaded. `/` focuses the box, Escape clears it.

/** The words of a query, lower-cased: a task matches when its id or title holds every one. */
export function searchTerms(q) {
  return String(q || '').toLowerCase().split(/\s+/).filter(Boolean);
}

export function matches(task, terms) {
  if (!terms.length) return true;
  const text = `${task.id}\n${task.title || ''}`.toLowerCase();
  return terms.every((t) => text.includes(t));
}

/** This page's URL with `q` set to `query` (or removed), other parameters kept as they are. */
export function urlWithQuery(loc, query) {
  const parts = loc.search.replace(/^\?/, '').split('&').filter((p) => p && !/^q(=|$)/.test(p));
  if (query.trim()) parts.push(`q=${encodeURIComponent(query).replace(/%20/g, '+')}`);
  return `${loc.pathname}${parts.length ? `?${parts.join('&')}` : ''}${loc.hash}`;
}

function typingIn(target) {
  return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
}

export class SearchBox {
  /**
   * @param {HTMLInputElement} input
   * @param {(query: string) => void} onChange   called on every edit, and not on construction
   */
  constructor(input, onChange) {
    this.input = input;
    this.onChange = onChange;
    input.value = new URLSearchParams(location.search).get('q') || '';
    input.addEventListener('input', () => this.changed());
    input.addEventListener('keydown', (e) => {
      if (e.key === 'Escape' && input.value) {
        e.preventDefault();
        input.value = '';
        this.changed();
      }
    });
    document.addEventListener('keydown', (e) => {
      if (e.key !== '/' || e.ctrlKey || e.metaKey || e.altKey || typingIn(e.target)) return;
      e.preventDefault();
      input.focus();
      input.select();
    });
  }

  get value() {
    return this.input.value;
  }

  changed() {
    const q = this.input.value;
    history.replaceState(history.state, '', urlWithQuery(location, q));
    this.onChange(q);
  }
}
