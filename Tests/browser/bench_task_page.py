#!/usr/bin/env python3
"""Scroll benchmark for a task's page: a task with a 10 000-line log tail and 1 000 timeline
entries (the server keeps that many with logLines 10000 and timelineEntries 1000), opened in
headless Chromium, then scrolled through, end to end, in steps of one frame: the log box, the
timeline, and the page. It reports long tasks (PerformanceObserver 'longtask': main-thread work
over 50 ms) while scrolling and while loading, and the frames per second while scrolling.

    python3 Tests/browser/bench_task_page.py [--lines 10000] [--entries 1000] [--json]

RINGCAST_BIN picks the server binary (default .build/release/ringcast)."""

import argparse
import json
import sys
import tempfile
from pathlib import Path

from selenium.webdriver.support.wait import WebDriverWait

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import Server, make_driver  # noqa: E402

INSTRUMENT = """
window.__bench = {longTasks: []};
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) window.__bench.longTasks.push(e.duration);
}).observe({type: 'longtask', buffered: true});
"""

# Scrolls `target` from top to bottom in `steps` frames, one step a frame; resolves to the frame times.
SCROLL = """
const [which, steps, done] = [arguments[0], arguments[1], arguments[arguments.length - 1]];
const el = which === 'page' ? document.scrollingElement : document.getElementById(which);
el.scrollTop = 0;
const frames = [];
let k = 0;
const start = window.__bench.longTasks.length;
const step = (t) => {
  frames.push(t);
  el.scrollTop = (el.scrollHeight - el.clientHeight) * (k / steps);
  if (++k <= steps) requestAnimationFrame(step);
  else done({frames, longTasks: window.__bench.longTasks.slice(start), height: el.scrollHeight});
};
requestAnimationFrame(step);
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=10_000)
    ap.add_argument("--entries", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=240, help="frames to scroll each box through")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    server = Server(heartbeat=15, workdir=tempfile.mkdtemp(prefix="ringcast-bench-"),
                    settings={"logLines": args.lines, "timelineEntries": args.entries}).start()
    driver = make_driver(width=1280, height=900)
    try:
        task = "bench.deploy"
        server.post(f"/api/tasks/{task}", {"title": "A long deploy", "progress": 0.5, "controls": ["cancel", "pause"]})
        for start in range(0, args.lines, 5000):
            server.post(f"/api/tasks/{task}/log", {"lines": [
                f"{n:05d} step {n % 97} of the rollout: pod shop-{n % 13} reports ready after {n % 7}.{n % 10} s"
                for n in range(start, min(args.lines, start + 5000))]})
        # Each hide and show is an entry; the batch endpoint takes them all in a few requests.
        events = [{"type": "hide" if n % 2 == 0 else "show", "id": task} for n in range(args.entries)]
        for start in range(0, len(events), 500):
            server.post("/api/events", events[start:start + 500])
        timeline = server.api("GET", f"/api/tasks/{task}/timeline")["entries"]
        driver.get(f"{server.base}/tasks/{task}")
        driver.execute_script(INSTRUMENT)
        WebDriverWait(driver, 30).until(lambda d: d.execute_script(
            "return document.getElementById('log').dataset.lines === arguments[0]"
            " && document.querySelectorAll('#timeline li').length === arguments[1]", str(args.lines), len(timeline)))
        loading = driver.execute_script("return window.__bench.longTasks.slice()")
        result = {"logLines": args.lines, "timelineEntries": len(timeline), "loadLongTasksMs": [round(d) for d in loading]}
        driver.set_script_timeout(60)
        for which in ("log", "timeline", "page"):
            run = driver.execute_async_script(SCROLL, which, args.steps)
            frames = run["frames"]
            seconds = (frames[-1] - frames[0]) / 1000
            result[which] = {
                "fps": round((len(frames) - 1) / seconds, 1) if seconds > 0 else None,
                "longTasks": len(run["longTasks"]),
                "longestTaskMs": round(max(run["longTasks"]), 1) if run["longTasks"] else 0,
                "scrollHeight": run["height"],
            }
        result["longTaskWhileScrolling"] = any(result[w]["longTasks"] for w in ("log", "timeline", "page"))
        if args.json:
            print(json.dumps(result))
        else:
            print(json.dumps(result, indent=1))
    finally:
        driver.quit()
        server.stop()


if __name__ == "__main__":
    main()
