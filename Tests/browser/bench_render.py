#!/usr/bin/env python3
"""Render benchmark for the dashboard: N tasks (default 500) each updated R times a second
(default 10) for S seconds (default 10), pushed through the real server's batch endpoint
(POST /api/events), watched by the dashboard in headless Chromium, with everything the
dashboard draws on (rate sparklines included: every task here runs with a rate).

It reports the frames the page rendered per second (a requestAnimationFrame counter), the
frame-interval percentiles, long tasks (PerformanceObserver 'longtask', main-thread work
over 50 ms), how many ring updates and sparkline redraws reached the DOM, and checks that
the page ends up showing the final values on every card, on screen or not.

    python3 Tests/browser/bench_render.py [--tasks 500] [--rate 10] [--seconds 10]
    python3 Tests/browser/bench_render.py --tasks 5000      # the target: >= 30 frames/s

RINGCAST_BIN picks the server binary (default .build/release/ringcast)."""

import argparse
import contextlib
import json
import statistics
import sys
import threading
import time
from pathlib import Path

from selenium.common.exceptions import TimeoutException
from selenium.webdriver.support.wait import WebDriverWait

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import Server, make_driver  # noqa: E402

INSTRUMENT = """
window.__bench = {frames: [], longTasks: [], valueWrites: 0, sparkWrites: 0, running: true};
const b = window.__bench;
const loop = (t) => { b.frames.push(t); if (b.running) requestAnimationFrame(loop); };
requestAnimationFrame(loop);
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) b.longTasks.push({start: e.startTime, duration: e.duration});
}).observe({type: 'longtask', buffered: false});
new MutationObserver((records) => {
  for (const r of records) {
    if (r.attributeName === 'aria-valuenow') b.valueWrites++;
    else if (r.target.classList.contains('spark-line')) b.sparkWrites++;
  }
}).observe(document.getElementById('tasks'), {subtree: true, attributes: true, attributeFilter: ['aria-valuenow', 'd']});
b.start = performance.now();
"""

COLLECT = """
const b = window.__bench;
b.running = false;
const end = performance.now();
return {start: b.start, end, frames: b.frames.filter(t => t >= b.start),
        longTasks: b.longTasks.filter(e => e.start >= b.start), valueWrites: b.valueWrites,
        sparkWrites: b.sparkWrites,
        sparksShown: [...document.querySelectorAll('svg.spark')].filter(s => s.checkVisibility()).length};
"""


def frame_stats(raw):
    frames = raw["frames"]
    seconds = (raw["end"] - raw["start"]) / 1000
    gaps = [b - a for a, b in zip(frames, frames[1:])]
    gaps_sorted = sorted(gaps) or [0]

    def pct(p):
        return gaps_sorted[min(len(gaps_sorted) - 1, int(p / 100 * len(gaps_sorted)))]

    lt = [e["duration"] for e in raw["longTasks"]]
    return {
        "seconds": round(seconds, 2),
        "frames": len(frames),
        "fps": round(len(frames) / seconds, 1) if seconds else 0,
        "frame_ms_p50": round(statistics.median(gaps), 1) if gaps else None,
        "frame_ms_p95": round(pct(95), 1),
        "frame_ms_max": round(max(gaps), 1) if gaps else None,
        "frames_over_50ms": sum(1 for g in gaps if g > 50),
        "long_tasks": len(lt),
        "long_task_ms_total": round(sum(lt), 1),
        "long_task_ms_max": round(max(lt), 1) if lt else 0,
        "valuenow_writes": raw["valueWrites"],
        "sparkline_redraws": raw["sparkWrites"],
        "sparklines_at_end": raw["sparksShown"],
    }


def drive(server, ids, rate, seconds, progress_of, stats):
    """Posts one batch per 1/rate s; every task gets one update per batch."""
    ticks = int(rate * seconds)
    t0 = time.monotonic()
    late = 0
    post_ms = []
    for k in range(ticks):
        due = t0 + k / rate
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        else:
            late += 1
        batch = [{"type": "update", "id": i, "progress": progress_of(k)} for i in ids]
        s = time.monotonic()
        server.post("/api/events", batch)
        post_ms.append((time.monotonic() - s) * 1000)
    stats.update(batches=ticks, events=ticks * len(ids), late_batches=late,
                 send_seconds=round(time.monotonic() - t0, 2),
                 post_ms_p50=round(statistics.median(post_ms), 1), post_ms_max=round(max(post_ms), 1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=500, help="tasks on the page (the target is 30 frames/s at 5000)")
    ap.add_argument("--rate", type=float, default=10, help="updates per second per task")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--idle-seconds", type=float, default=2, help="baseline measurement without load")
    ap.add_argument("--json", action="store_true", help="print only the JSON result")
    args = ap.parse_args()

    server = Server(heartbeat=5).start()
    driver = make_driver()
    try:
        ids = [f"bench.{n}" for n in range(args.tasks)]
        server.post("/api/events", [{"type": "update", "id": i, "title": f"Task {n}", "progress": 0}
                                    for n, i in enumerate(ids)])
        driver.get(server.base + "/?watch=bench.*")
        try:
            WebDriverWait(driver, 60, poll_frequency=0.1).until(lambda d: d.execute_script("""
                const s = document.getElementById('splash');
                return (!s || s.hidden) && document.querySelectorAll('.task:not(.leaving)').length >= arguments[0]
                  && document.getAnimations().every((a) => a.playState !== 'running'
                       || a.effect.getComputedTiming().iterations === Infinity);""", args.tasks))
        except TimeoutException:
            raise SystemExit("the dashboard did not show all tasks") from None

        driver.execute_script(INSTRUMENT)
        time.sleep(args.idle_seconds)
        idle = frame_stats(driver.execute_script(COLLECT))

        ticks = int(args.rate * args.seconds)
        progress_of = lambda k: round(((k + 1) % 101) / 100, 2)  # noqa: E731
        driver.execute_script(INSTRUMENT)
        send = {}
        sender = threading.Thread(target=drive, args=(server, ids, args.rate, args.seconds, progress_of, send))
        sender.start()
        sender.join()
        loaded = frame_stats(driver.execute_script(COLLECT))

        # The page must end up showing the last value of every task, on screen or not.
        final = str(round(progress_of(ticks - 1) * 100))
        count_wrong = """return [...document.querySelectorAll('.task [role=progressbar]')]
                           .filter(r => r.getAttribute('aria-valuenow') !== arguments[0]).length;"""
        with contextlib.suppress(TimeoutException):  # counted just below
            WebDriverWait(driver, 5, poll_frequency=0.1).until(
                lambda d: d.execute_script(count_wrong, final) == 0)
        wrong = driver.execute_script(count_wrong, final)

        result = {
            "tasks": args.tasks, "updates_per_task_per_s": args.rate, "seconds": args.seconds,
            "sent": send, "idle": idle, "under_load": loaded,
            "cards_with_wrong_final_value": wrong,
            "browser": driver.capabilities.get("browserVersion"),
        }
        if args.json:
            print(json.dumps(result))
        else:
            print(f"ringcast render benchmark: {args.tasks} tasks x {args.rate:g} updates/s for {args.seconds:g} s"
                  f" (Chromium {result['browser']}, headless)")
            print(f"  sent: {send['events']} events in {send['batches']} batches over {send['send_seconds']} s"
                  f" (POST p50 {send['post_ms_p50']} ms, max {send['post_ms_max']} ms, late batches {send['late_batches']})")
            for name, s in (("idle", idle), ("under load", loaded)):
                print(f"  {name:>10}: {s['fps']} frames/s ({s['frames']} in {s['seconds']} s);"
                      f" frame p50 {s['frame_ms_p50']} ms, p95 {s['frame_ms_p95']} ms, max {s['frame_ms_max']} ms,"
                      f" {s['frames_over_50ms']} frames > 50 ms;"
                      f" long tasks {s['long_tasks']} (total {s['long_task_ms_total']} ms, max {s['long_task_ms_max']} ms)")
            print(f"  ring value writes under load: {loaded['valuenow_writes']}"
                  f" for {send['events']} events (batched per frame; off-screen cards in idle time)")
            print(f"  sparkline redraws under load: {loaded['sparkline_redraws']};"
                  f" sparklines shown at the end: {loaded['sparklines_at_end']}")
            print(f"  cards not showing the final value 5 s after the last batch: {wrong}")
            print(json.dumps(result))
        return 0 if wrong == 0 else 1
    finally:
        driver.quit()
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
