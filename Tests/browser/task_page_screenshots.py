#!/usr/bin/env python3
"""Makes the README's screenshots of a task's page and of the dashboard on a phone and a wall,
against the real server in headless Chromium:

    docs/task-page-dark.png     a deploy's page in the dark theme: ring, figures, log, timeline
                                with a cancel request and who asked, its kind's past runs
    docs/task-page-light.png    the same in the light theme
    docs/dashboard-phone.png    the dashboard 360 px wide: one column
    docs/dashboard-wall.png     the dashboard as a wall display (?view=wall)

    python3 Tests/browser/task_page_screenshots.py   (RINGCAST_BIN picks the server, as for the tests)"""

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_screenshots import READY, SETTLED, seed_history  # noqa: E402
from harness import REPO, Server, make_driver  # noqa: E402
from selenium.webdriver.support.wait import WebDriverWait  # noqa: E402

DOCS = REPO / "docs"


def publish(server):
    post = server.post
    post("/api/tasks/team.deploy-7", {"title": "Deploy to staging", "detail": "rolling out 3 of 8 pods", "progress": 0.38,
                                      "kind": "team.deploy", "controls": ["cancel", "pause", "resume"],
                                      "url": "https://ci.example.com/pipelines/7"})
    post("/api/tasks/team.deploy-7.pods", {"title": "Roll out pods", "parent": "team.deploy-7", "progress": 0.38})
    post("/api/tasks/team.deploy-7.smoke", {"title": "Smoke tests", "parent": "team.deploy-7", "progress": None})
    post("/api/tasks/team.deploy-7/log", {"lines": [
        "pulling image registry.example.com/shop:2.0.0", "image pulled in 4.2 s", "pod shop-7f9c-1 ready",
        "pod shop-7f9c-2 ready", "pod shop-7f9c-3 ready", "waiting for pod shop-7f9c-4 (readiness probe)"]})
    post("/api/tasks/team.deploy-7/pause")
    post("/api/tasks/team.deploy-7", {"state": "paused"})
    post("/api/tasks/team.deploy-7/resume")
    post("/api/tasks/team.deploy-7", {"state": "running", "progress": 0.42})
    post("/api/tasks/team.migrate-3", {"title": "Database migration", "detail": "orders table", "progress": 0.35})
    post("/api/tasks/team.e2e", {"title": "End-to-end tests", "detail": "3 of 96 failed: checkout flow",
                                 "progress": 0.88, "state": "failed"})
    post("/api/tasks/team.lint", {"title": "Lint", "detail": "no warnings", "progress": 1, "state": "done"})
    post("/api/tasks/team.runner", {"title": "Waiting for a runner", "detail": "2 jobs ahead", "progress": None})
    post("/api/tasks/team.sync", {"title": "Mirror sync", "detail": "waiting for the network", "progress": 0.3,
                                  "state": "paused"})
    post("/api/timers/team.cooldown", {"seconds": 600, "title": "Cache cool-down"})


def settle(d):
    WebDriverWait(d, 10).until(lambda d: d.execute_script(SETTLED))


def main():
    workdir = tempfile.mkdtemp(prefix="ringcast-docs-")
    server = Server(heartbeat=15, workdir=workdir, storage=seed_history(workdir)).start()
    try:
        publish(server)
        time.sleep(3)  # not a wait for the page: "elapsed" has something to show
        for theme in ("dark", "light"):
            d = make_driver(width=1200, height=1180, dark=theme == "dark")
            try:
                d.get(f"{server.base}/tasks/team.deploy-7")
                WebDriverWait(d, 10).until(lambda d: d.execute_script(
                    "return document.getElementById('status').dataset.state === 'live'"
                    " && document.querySelectorAll('#timeline li').length > 3 && !!document.querySelector('#runs svg')"))
                settle(d)
                d.save_screenshot(str(DOCS / f"task-page-{theme}.png"))
            finally:
                d.quit()
        d = make_driver(width=500, height=900)
        try:
            # A desktop window is at least 500 px wide: the phone is emulated, as a phone's viewport.
            d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": 360, "height": 780, "deviceScaleFactor": 1, "mobile": True})
            d.get(f"{server.base}/?watch=team.*")
            WebDriverWait(d, 10).until(lambda d: d.execute_script(READY))
            settle(d)
            d.save_screenshot(str(DOCS / "dashboard-phone.png"))
        finally:
            d.quit()
        d = make_driver(width=1600, height=900, dark=True)
        try:
            d.get(f"{server.base}/?watch=team.*&view=wall")
            WebDriverWait(d, 10).until(lambda d: d.execute_script(READY))
            settle(d)
            d.save_screenshot(str(DOCS / "dashboard-wall.png"))
        finally:
            d.quit()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
