#!/usr/bin/env python3
"""Makes the README's screenshots of the dashboard against the real server, in headless Chromium:

    docs/dashboard.png          a team's dashboard: rings with rate sparklines, a spinner, a
                                countdown, a parent with its children, cards that say what their
                                kind usually takes (one slower than usual), Recent folded
    docs/dashboard-team.png     the same with Recent open, and the bell on
    docs/dashboard-search.png   filtered with ?q=test
    docs/badges.png             the SVG badges of a few tasks, as a README shows them
    docs/terminal.png           `ringcast ls --watch`: the server's text table in a terminal

Sparklines draw the rates the page saw, so the page is open while the tasks move (about 30 s).
The kinds' past runs are made first (a few quick runs), then given the lengths a week of real
runs would have left, in the server's own storage file: a screenshot cannot wait three minutes
a run.

    python3 Tests/browser/docs_screenshots.py   (RINGCAST_BIN picks the server, as for the tests)"""

import html
import math
import sqlite3
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import REPO, Server, make_driver  # noqa: E402
from selenium.webdriver.support.wait import WebDriverWait  # noqa: E402

DOCS = REPO / "docs"
READY = """const s = document.getElementById('splash');
    return (!s || s.hidden) && document.getElementById('status').dataset.state === 'live';"""
SETTLED = """return document.getAnimations().every((a) => a.playState !== 'running'
    || a.effect.getComputedTiming().iterations === Infinity);"""


# Kind -> the lengths (seconds) of its last runs: "usually 3 min"; "usually 20 s", and slow past 22 s.
HISTORY = {"team.deploy": [170, 180, 185, 175, 190, 180], "team.migrate": [18, 20, 19, 22, 21]}


def seed_history(workdir):
    """A storage file whose kinds have HISTORY's runs: real runs (of a few milliseconds), made by
    the server, then their lengths set while it is stopped."""
    db = Path(workdir) / "state.db"
    server = Server(heartbeat=15, workdir=workdir, storage=db).start()
    try:
        for kind, runs in HISTORY.items():
            for k in range(len(runs)):
                server.post(f"/api/tasks/history.{kind}.{k}", {"kind": kind, "progress": None})
                time.sleep(0.01)  # not a wait: a run that lasts
                server.post(f"/api/tasks/history.{kind}.{k}", {"state": "done"})
    finally:
        server.stop()
    with sqlite3.connect(db) as con:
        for kind, runs in HISTORY.items():
            con.execute("UPDATE kind_history SET seconds = ? WHERE kind = ?", (str(runs), kind))
    return db


def shoot_badges(d, server, workdir):
    """docs/badges.png: each badge as an <img>, as a README on GitHub embeds it."""
    rows = [("team.build-42", ""), ("team.docs", ""), ("team.e2e", "?label=end-to-end"), ("team.sync", ""),
            ("team.deploy-7", "?label=deploy"), ("no.such.task", "")]
    items = "\n".join(f'<p><img alt="" src="{server.base}/badge/{i}.svg{q}"><code>/badge/{i}.svg{html.escape(q)}</code></p>'
                      for i, q in rows)
    page = Path(workdir) / "badges.html"
    page.write_text(f"""<!doctype html><html><head><meta charset="utf-8"><title>badges</title><style>
      body {{ margin: 0; background: #fff; font: 13px/1.4 "DejaVu Sans", sans-serif; }}
      #badges {{ display: inline-block; padding: 18px 24px; }}
      p {{ display: flex; align-items: center; gap: 18px; margin: 10px 0; }}
      img {{ height: 30px; }} code {{ color: #57606a; font: 17px "DejaVu Sans Mono", monospace; }}
      </style></head><body><div id="badges">{items}</div></body></html>""")
    d.get(page.as_uri())
    WebDriverWait(d, 5).until(lambda d: d.execute_script(
        "return [...document.images].every((i) => i.complete && i.naturalWidth > 0)"))
    d.find_element("id", "badges").screenshot(str(DOCS / "badges.png"))


def shoot_terminal(d, server, workdir):
    """docs/terminal.png: the server's text table as `ringcast ls --watch` draws it, in a <pre>."""
    req = urllib.request.Request(server.base + "/api/tasks?watch=team.*", headers={"Accept": "text/plain"})
    with urllib.request.urlopen(req, timeout=10) as r:
        table = r.read().decode()
    top = f"ringcast ls --watch · {server.base} · {time.strftime('%H:%M:%S')}"
    page = Path(workdir) / "terminal.html"
    page.write_text(f"""<!doctype html><html><head><meta charset="utf-8"><title>terminal</title><style>
      body {{ margin: 0; background: #fff; }}
      #term {{ display: inline-block; margin: 0; padding: 14px 18px; background: #1e1e2e; color: #d9e0ee;
              font: 14px/1.35 "DejaVu Sans Mono", monospace; border-radius: 8px; }}
      .prompt {{ color: #a6e3a1; }} .top {{ color: #89b4fa; }}
      </style></head><body><pre id="term"><span class="prompt">$ ringcast ls 'team.*' --watch</span>
<span class="top">{html.escape(top)}</span>

{html.escape(table)}</pre></body></html>""")
    d.get(page.as_uri())
    d.find_element("id", "term").screenshot(str(DOCS / "terminal.png"))


def main():
    workdir = tempfile.mkdtemp(prefix="ringcast-docs-")
    server = Server(heartbeat=15, workdir=workdir, storage=seed_history(workdir)).start()
    driver = make_driver(width=1280, height=1000)
    post = server.post
    try:
        # Kinds with past runs: a spinner whose ETA comes from them, and a run past their 90th
        # percentile (22 s) by the time the shot is taken.
        post("/api/tasks/team.deploy-7", {"title": "Deploy to staging", "detail": "rolling out 3 of 8 pods", "progress": None})
        post("/api/tasks/team.migrate-3", {"title": "Database migration", "detail": "orders table", "progress": 0.35})
        post("/api/tasks/team.lint", {"title": "Lint", "detail": "no warnings", "progress": 1, "state": "done"})
        post("/api/tasks/team.e2e", {"title": "End-to-end tests", "detail": "3 of 96 failed: checkout flow",
                                     "progress": 0.88, "state": "failed"})
        post("/api/tasks/team.docs", {"title": "Docs site", "detail": "published", "progress": 1, "state": "done"})
        post("/api/tasks/team.bench", {"title": "Nightly benchmark", "detail": "superseded", "progress": 0.3,
                                       "state": "cancelled"})
        post("/api/tasks/team.sync", {"title": "Mirror sync", "detail": "waiting for the network", "progress": 0.3,
                                      "state": "paused"})
        post("/api/tasks/team.runner", {"title": "Waiting for a runner", "detail": "2 jobs ahead", "progress": None})
        post("/api/tasks/team.release", {"title": "Release 2.0"})
        post("/api/tasks/team.release.notes", {"title": "Release notes", "progress": 1, "state": "done",
                                               "parent": "team.release"})
        post("/api/tasks/team.release.pkg", {"title": "Packages", "progress": 0.1, "parent": "team.release"})
        post("/api/timers/team.tea", {"seconds": 300, "title": "Tea timer"})
        moving = {  # id -> (title, units total, speed over time)
            "team.build-42": ("Build ringcast", 338, lambda t: 4 + 3 * math.sin(t / 4)),
            "team.tests": ("Unit tests", 1200, lambda t: 10 + t * 1.2),
            "team.upload": ("Upload artifacts", 2048, lambda t: 60 if (t // 6) % 2 == 0 else 15),
        }
        done = {i: 0.0 for i in moving}
        for i, (title, total, _) in moving.items():
            post(f"/api/tasks/{i}", {"title": title, "completed": 0, "total": total})

        d = driver
        d.execute_cdp_cmd("Browser.grantPermissions", {"origin": server.base, "permissions": ["notifications"]})
        d.get(server.base + "/?watch=team.*")
        WebDriverWait(d, 10).until(lambda d: d.execute_script(READY))
        d.find_element("id", "bell").click()
        t0 = time.monotonic()
        step = 0.5
        k = 0
        while time.monotonic() - t0 < 28:  # fourteen 2-second slots of history
            k += 1
            due = t0 + k * step
            time.sleep(max(0, due - time.monotonic()))
            t = due - t0
            for i, (_title, total, speed) in moving.items():
                done[i] = min(total * 0.95, done[i] + speed(t) * step)
                post(f"/api/tasks/{i}", {"completed": round(done[i]),
                                         "detail": f"{round(done[i])} of {total}" if i != "team.upload" else "to the mirror"})
            pkg = min(0.9, 0.1 + t / 40)
            post("/api/tasks/team.release.pkg", {"progress": round(pkg, 3)})
        WebDriverWait(d, 5).until(lambda d: d.execute_script(SETTLED))
        d.save_screenshot(str(DOCS / "dashboard.png"))
        d.find_element("css selector", "#recent > summary").click()
        d.execute_script("document.activeElement.blur()")
        time.sleep(0.5)  # not a wait: Recent's cards play their entry animation
        WebDriverWait(d, 5).until(lambda d: d.execute_script(SETTLED))
        d.save_screenshot(str(DOCS / "dashboard-team.png"))
        d.get(server.base + "/?watch=team.*&q=test")
        WebDriverWait(d, 10).until(lambda d: d.execute_script(READY))
        WebDriverWait(d, 5).until(lambda d: d.execute_script(SETTLED))
        d.save_screenshot(str(DOCS / "dashboard-search.png"))
        shoot_badges(d, server, workdir)
        shoot_terminal(d, server, workdir)
        print("wrote", ", ".join(str(DOCS / n) for n in (
            "dashboard.png", "dashboard-team.png", "dashboard-search.png", "badges.png", "terminal.png")))
    finally:
        driver.quit()
        server.stop()


if __name__ == "__main__":
    main()
