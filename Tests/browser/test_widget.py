"""The embeddable widget beside the dashboard, in headless Chromium against the real server. Both
show a task through the same modules (js/face.js, js/store.js, js/connection.js); this test holds
the widget's card and the dashboard's card to the same visible text for the same task, in every
shape a task takes, so that they cannot drift apart again.

The widgets are put on the dashboard's own page (the server's origin, so its CSP lets the widget's
script and sockets in): both cards are then read in one go, at one moment, from one clock."""

import re
import time

# What a card shows, read from `owner` (the element with data-state) and `main` (what holds the
# ring and the text): each part's text as rendered (nothing for a part not shown), the ring's
# attributes, and the rendered text (innerText: text-transform and layout applied) of ring, head,
# detail and meta.
READ = """
const face = (owner, main) => {
  const q = (s) => main.querySelector(s);
  const shown = (e) => (e && e.checkVisibility() ? e.textContent : '');
  const said = (e) => (e && e.checkVisibility() ? e.innerText.replace(/\\s+/g, ' ').trim() : '');
  const ring = q('[role=progressbar]');
  return {
    state: owner.dataset.state, request: owner.dataset.request || '',
    title: shown(q('.title')), badge: shown(q('.badge')), detail: shown(q('.detail')),
    units: shown(q('.units')), rate: shown(q('.rate')), eta: shown(q('.eta')), usual: shown(q('.usual')),
    slow: !!q('.usual.slow'),
    num: shown(ring.querySelector('.num')), unit: shown(ring.querySelector('.unit')),
    ring: ['spinner', 'timer', 'static'].filter((c) => ring.classList.contains(c)).join(' '),
    valuenow: ring.getAttribute('aria-valuenow'), valuetext: ring.getAttribute('aria-valuetext'),
    label: ring.getAttribute('aria-label'), busy: ring.getAttribute('aria-busy'),
    text: [ring, q('.head'), q('.detail'), q('.meta')].map(said).join(' | '),
  };
};
const id = arguments[0];
const card = document.querySelector(`.task[data-id="${id}"]`);
const widget = document.querySelector(`ringcast-task[task="${id}"]`);
const inside = widget && widget.shadowRoot && widget.shadowRoot.querySelector('.card');
return {dashboard: card && face(card, card.querySelector(':scope > .task-main')),
        widget: inside && inside.dataset.state !== 'none' ? face(inside, inside) : null};
"""

MOUNT = """
const [server, ids] = arguments;
const script = document.createElement('script');
script.type = 'module';
script.src = '/ringcast-widget.js';
document.head.append(script);
const box = document.createElement('div');
for (const id of ids) {
  const w = document.createElement('ringcast-task');
  w.setAttribute('server', server);
  w.setAttribute('task', id);
  box.append(w);
}
document.body.append(box);
"""


def same_face(page, task_id, timeout=5):
    """Waits until the widget's card and the dashboard's say the same of `task_id`; returns it. A
    countdown may change between the two reads of one frame: then the next frame agrees."""
    last = {}

    def agree():
        last.update(page.js(READ, task_id))
        return last["dashboard"] and last["dashboard"] == last["widget"] and last["dashboard"]

    try:
        return page.wait(agree, timeout, f"the widget and the dashboard disagree on {task_id}")
    except AssertionError:
        raise AssertionError(f"the widget and the dashboard disagree on {task_id}:\n"
                             f"  dashboard {last.get('dashboard')}\n  widget    {last.get('widget')}") from None


def test_the_widget_and_the_dashboard_say_the_same_of_a_task(page, server):
    post = server.post
    # Three runs of a kind at once, a second each, so a fourth run's spinner has an ETA and "usually".
    for n in range(3):
        post(f"/api/tasks/par.pkg-{n}", {"title": f"Package {n}", "progress": None})
    for done in (101, 102, 103):  # three updates, so the server has a rate and an ETA
        post("/api/tasks/par.build", {"title": "Build", "detail": f"compiling {done} of 1000 files",
                                      "completed": done, "total": 1000})
        time.sleep(0.35)  # not a wait: time between updates is what the server's rate is made of
    time.sleep(0.3)  # not a wait: the kind's runs last a second
    for n in range(3):
        post(f"/api/tasks/par.pkg-{n}", {"state": "done"})
    post("/api/tasks/par.pkg-3", {"title": "Package 3", "progress": None})
    post("/api/tasks/par.lint", {"title": "Lint", "detail": "waiting for a runner", "progress": None})
    post("/api/timers/par.tea", {"seconds": 300, "title": "Tea"})
    post("/api/timers/par.nap", {"seconds": 120, "title": "Nap"})
    post("/api/timers/par.nap/pause")
    post("/api/tasks/par.tests", {"title": "Unit tests", "detail": "412 passed", "progress": 1, "state": "done"})
    post("/api/tasks/par.deploy", {"title": "Deploy", "detail": "exit status 1", "progress": 0.64, "state": "failed"})
    post("/api/tasks/par.sync", {"title": "Mirror sync", "progress": 0.3, "state": "paused"})
    post("/api/tasks/par.drop", {"title": "Dropped", "progress": None, "state": "cancelled"})
    post("/api/tasks/par.copy", {"title": "Copy", "progress": 0.2, "controls": ["cancel"]})
    post("/api/tasks/par.copy/cancel")
    ids = ["par.build", "par.pkg-3", "par.lint", "par.tea", "par.nap", "par.tests", "par.deploy", "par.sync",
           "par.drop", "par.copy"]

    page.open("par.*")
    page.js("document.getElementById('recent').open = true")  # finished cards fold into Recent
    page.js(MOUNT, server.ws_base, ids)
    faces = {i: same_face(page, i) for i in ids}
    page.shot()

    # Agreeing on nothing would not do: each says what that shape of task says.
    build = faces["par.build"]
    assert (build["title"], build["detail"], build["units"]) == ("Build", "compiling 103 of 1000 files", "103 / 1000")
    assert build["rate"].endswith("/s") and build["eta"].startswith("ETA ") and build["valuenow"] == "10", build
    assert re.search(r"usually \d+ s$", faces["par.pkg-3"]["usual"]), faces["par.pkg-3"]
    lint = faces["par.lint"]
    assert (lint["ring"], lint["busy"], lint["valuetext"], lint["num"]) == ("spinner", "true", "In progress", ""), lint
    tea = faces["par.tea"]
    # Past a minute a countdown reads as a clock (m:ss, no unit); under it, as seconds.
    assert tea["ring"] == "timer" and re.fullmatch(r"\d+ seconds left", tea["valuetext"]), tea
    assert (tea["unit"], re.fullmatch(r"\d+:\d\d", tea["num"]) is not None) == ("", True) or tea["unit"] == "s", tea
    nap = faces["par.nap"]
    minutes, _, seconds = nap["num"].rpartition(":")
    left = int(minutes or 0) * 60 + int(seconds)
    assert (nap["state"], nap["badge"], nap["valuetext"]) == ("paused", "Paused", f"{left} seconds left, paused"), nap
    assert (faces["par.tests"]["badge"], faces["par.tests"]["num"]) == ("Done", "✓")
    assert faces["par.deploy"]["valuetext"] == "64 percent, failed" and "FAILED" in faces["par.deploy"]["text"]
    assert faces["par.sync"]["valuetext"] == "30 percent, paused"
    assert (faces["par.drop"]["num"], faces["par.drop"]["valuetext"]) == ("–", "Cancelled")
    assert (faces["par.copy"]["request"], faces["par.copy"]["badge"]) == ("cancel", "Cancel waiting")

    # Live changes: a spinner turns into a ring, a running task finishes.
    post("/api/tasks/par.lint", {"progress": 0.25})
    page.sync(post("/api/tasks/par.build", {"completed": 1000, "state": "done"})["seq"])
    assert same_face(page, "par.lint")["valuenow"] == "25"
    assert same_face(page, "par.build")["num"] == "✓"
