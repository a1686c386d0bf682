// System notifications (the Notification API) when a watched task finishes, fails or stalls.
// The dashboard imports it; the widget loads it only when its `notify` attribute asks. One
// instance per page (`notifier`), so every bell on a page shows the same state and a task watched
// twice is notified once. Permission is asked for only from a click on a bell, never on load.
//
// Rules: a notification only for a change the page saw happen (not for states already there in
// the page's first snapshot), at most one per task and state for the life of the page (a resync
// after a reconnect re-sends states the page has seen: they are not notified again), and none
// while the page is in front (visible and focused): the person sees the card change.

const NOTABLE = { done: 'Done', failed: 'Failed', stalled: 'Stalled' };
const PREF_KEY = 'ringcast.notifications';

const BELL_TITLE = {
  off: 'Notify me when a task finishes, fails or stalls',
  on: 'Notifications are on: click to turn them off',
  blocked: 'Notifications are blocked for this site in the browser’s settings',
};

function readPref() {
  try {
    return localStorage.getItem(PREF_KEY) === 'on';
  } catch {
    return false; // storage disabled: the choice lasts as long as the page
  }
}

function writePref(on) {
  try {
    localStorage.setItem(PREF_KEY, on ? 'on' : 'off');
  } catch { /* storage disabled */ }
}

export class Notifier {
  constructor() {
    this.supported = typeof Notification === 'function';
    this.wanted = readPref();
    this.shown = new Set(); // `${scope}\n${id}\n${state}` already notified
    this.listeners = new Set();
    if (!this.supported) return;
    // The person may allow or block notifications in the browser's settings meanwhile.
    if (navigator.permissions?.query) {
      navigator.permissions.query({ name: 'notifications' })
        .then((status) => { status.onchange = () => this.changed(); }, () => {});
    }
    document.addEventListener('visibilitychange', () => this.changed());
  }

  /** 'unsupported', 'blocked' (denied in the browser), 'off' or 'on'. */
  get state() {
    if (!this.supported) return 'unsupported';
    const p = Notification.permission;
    if (p === 'denied') return 'blocked';
    return p === 'granted' && this.wanted ? 'on' : 'off';
  }

  subscribe(fn) {
    this.listeners.add(fn);
    fn(this.state);
    return () => this.listeners.delete(fn);
  }

  changed() {
    const state = this.state;
    if (state === this.last) return;
    this.last = state;
    for (const fn of this.listeners) fn(state);
  }

  /** A click on a bell: the first time asks the browser, later turns notifications on or off. */
  async toggle() {
    if (!this.supported || Notification.permission === 'denied') {
      this.changed();
      return this.state;
    }
    if (this.state === 'on') {
      this.wanted = false;
    } else {
      // Answers at once when the permission is already granted; asks the person otherwise.
      this.wanted = (await Notification.requestPermission()) === 'granted';
    }
    writePref(this.wanted);
    this.changed();
    return this.state;
  }

  /**
   * A task changed. `prevState` is the state the page held before (undefined for a task new to
   * it); `news` is false for the page's first snapshot. `scope` names the server, so two servers'
   * tasks of the same id stay apart. `icon`: an image URL the page's CSP allows (img-src), if
   * any; `onClick`: what a click on the notification does after focusing the window. Returns
   * whether a notification was shown.
   */
  consider(scope, task, prevState, news, { icon, onClick } = {}) {
    const label = NOTABLE[task.state];
    if (!label || !news || prevState === task.state || this.state !== 'on') return false;
    const key = `${scope}\n${task.id}\n${task.state}`;
    if (this.shown.has(key)) return false;
    if (document.visibilityState === 'visible' && document.hasFocus()) return false;
    this.shown.add(key);
    try {
      const n = new Notification(task.title || task.id, {
        body: task.detail ? `${label} · ${task.detail}` : label,
        tag: `ringcast:${scope}:${task.id}`, // a newer state of the task replaces the older
        ...(icon ? { icon } : {}),
      });
      n.onclick = () => {
        window.focus();
        n.close();
        if (onClick) onClick();
      };
    } catch (err) {
      // Some browsers allow notifications only from a service worker.
      console.warn('ringcast: cannot show a notification', err);
    }
    return true;
  }

  /** A removed task may come back as a new one: its states may be notified again. */
  forget(scope, id) {
    for (const state in NOTABLE) this.shown.delete(`${scope}\n${id}\n${state}`);
  }
}

export const notifier = new Notifier();

/** Makes `button` the bell: shows the state (data-state, aria-pressed, title) and toggles on click. */
export function bindBell(button, n = notifier) {
  if (!n.supported) {
    button.hidden = true;
    return;
  }
  button.hidden = false;
  n.subscribe((state) => {
    button.dataset.state = state;
    button.setAttribute('aria-pressed', String(state === 'on'));
    if (state === 'blocked') button.setAttribute('aria-disabled', 'true');
    else button.removeAttribute('aria-disabled');
    button.title = BELL_TITLE[state] || '';
  });
  button.addEventListener('click', () => { n.toggle(); });
}
