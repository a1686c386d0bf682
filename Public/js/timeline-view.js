// A task's timeline on its page (GET api/tasks/{id}/timeline): one line per entry, oldest first,
// with its time and who made it.

import { appURL } from './base.js';
import { el } from './dom.js';
import { stateLabel } from './ring.js';

const ACTION = { cancel: 'Cancel', pause: 'Pause', resume: 'Resume' };

/** What an entry says: "Cancel requested by alice", "Entered Paused", "Created (running)". */
export function entryText(entry) {
  const by = entry.by ? ` by ${entry.by}` : '';
  switch (entry.event) {
    case 'created': return `Created${entry.state && entry.state !== 'running' ? ` ${stateLabel(entry.state).toLowerCase()}` : ''}${by}`;
    case 'state': return `${stateLabel(entry.state)}${by}`;
    case 'shown': return `Shown${by}`;
    case 'hidden': return `Hidden${by}`;
    case 'requested': return `${ACTION[entry.action] || entry.action} requested${by}`;
    case 'abandoned': return `Abandoned: no update, ended ${stateLabel(entry.state).toLowerCase()}`;
    default: return `${entry.event}${by}`;
  }
}

export class TimelineView {
  /** @param {HTMLOListElement} list  @param {string} id  the task */
  constructor(list, id) {
    this.list = list;
    this.id = id;
    this.pending = null;
    this.again = false;
  }

  /** Loads the timeline again (once more after the load under way, when asked meanwhile). */
  refresh() {
    if (this.pending) {
      this.again = true;
      return this.pending;
    }
    this.pending = fetch(appURL(`api/tasks/${encodeURIComponent(this.id)}/timeline`), { headers: { Accept: 'application/json' } })
      .then((r) => (r.ok ? r.json() : null))
      .then((answer) => { if (answer && Array.isArray(answer.entries)) this.render(answer.entries); })
      .catch((err) => console.warn(`ringcast: cannot load the timeline of ${this.id}`, err))
      .finally(() => {
        this.pending = null;
        if (this.again) {
          this.again = false;
          this.refresh();
        }
      });
    return this.pending;
  }

  render(entries) {
    const items = entries.map((entry) => {
      const li = el('li', `entry entry-${entry.event}`);
      li.dataset.event = entry.event;
      if (entry.state) li.dataset.state = entry.state;
      if (entry.by) li.dataset.by = entry.by;
      const when = new Date(entry.at);
      const time = el('time', null, when.toLocaleTimeString('en-GB'));
      time.dateTime = when.toISOString();
      time.title = when.toLocaleString();
      li.append(time, el('span', 'what', entryText(entry)));
      return li;
    });
    this.list.replaceChildren(...items);
    this.list.dataset.count = String(entries.length);
  }
}
