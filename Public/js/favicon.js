// The page title and the favicon show the overall progress.

const COLORS = { running: '#6d5dfc', done: '#16a34a', failed: '#dc2626' };
const MIN_ICON_INTERVAL_MS = 250;

function iconURL(pct, color) {
  const svg = '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">'
    + '<circle cx="16" cy="16" r="12" fill="none" stroke="#94a3b8" stroke-opacity=".35" stroke-width="6"/>'
    + `<circle cx="16" cy="16" r="12" fill="none" stroke="${color}" stroke-width="6" pathLength="100" `
    + `stroke-dasharray="${pct} 100" transform="rotate(-90 16 16)"/></svg>`;
  return `data:image/svg+xml,${encodeURIComponent(svg)}`;
}

export class TitleAndIcon {
  constructor(link, name = 'Ringcast') {
    this.link = link;
    this.name = name;
    this.defaultHref = link ? link.getAttribute('href') : null;
    this.iconKey = '';
    this.lastIcon = 0;
    this.pending = 0;
  }

  /** @param {{pct: number|null, running: number, done: number, failed: number}} s */
  update(s) {
    let title = this.name;
    if (s.pct != null) title = `${s.pct}% · ${this.name}`;
    else if (s.running) title = `${s.running} running · ${this.name}`;
    if (s.failed) title = `${s.failed} failed · ${title}`;
    if (document.title !== title) document.title = title;

    let key = 'default';
    if (s.pct != null) key = `${s.failed ? 'failed' : 'running'}:${s.pct}`;
    this.setIcon(key);
  }

  setIcon(key) {
    if (!this.link || key === this.iconKey) return;
    const wait = MIN_ICON_INTERVAL_MS - (performance.now() - this.lastIcon);
    if (wait > 0) {
      this.nextKey = key;
      if (!this.pending) this.pending = setTimeout(() => { this.pending = 0; this.setIcon(this.nextKey); }, wait);
      return;
    }
    this.iconKey = key;
    this.lastIcon = performance.now();
    if (key === 'default') {
      this.link.setAttribute('href', this.defaultHref);
      return;
    }
    const [kind, pct] = key.split(':');
    this.link.setAttribute('href', iconURL(Number(pct), COLORS[kind]));
  }
}
