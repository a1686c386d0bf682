#!/usr/bin/env python3
"""Makes the README's screenshots of the dashboard against the real server, in headless Chromium:

    docs/dashboard.png          a team's dashboard: rings with rate sparklines, a spinner, a
                                countdown, a parent with its children, Recent folded
    docs/dashboard-team.png     the same with Recent open, and the bell on
    docs/dashboard-search.png   filtered with ?q=test

Sparklines draw the rates the page saw, so the page is open while the tasks move (about 30 s).

    python3 Tests/browser/docs_screenshots.py   (RINGCAST_BIN picks the server, as for the tests)"""

import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import REPO, Server, make_driver  # noqa: E402

from selenium.webdriver.support.wait import WebDriverWait  # noqa: E402

DOCS = REPO / "docs"
READY = """const s = document.getElementById('splash');
    return (!s || s.hidden) && document.getElementById('status').dataset.state === 'live';"""
SETTLED = """return document.getAnimations().every((a) => a.playState !== 'running'
    || a.effect.getComputedTiming().iterations === Infinity);"""


def main():
    server = Server(heartbeat=15).start()
    driver = make_driver(width=1280, height=900)
    post = server.post
    try:
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
            for i, (title, total, speed) in moving.items():
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
        print("wrote", ", ".join(str(DOCS / n) for n in ("dashboard.png", "dashboard-team.png", "dashboard-search.png")))
    finally:
        driver.quit()
        server.stop()


if __name__ == "__main__":
    main()
