#!/usr/bin/env python3
"""Turns the per-run JSON of Benchmarks/run into Benchmarks/RESULTS.md.

Each scenario ran Ringcast and the reference server in alternating rounds through the same
`ringcast load` command; this writes, per scenario and figure, the median and min-max of each server
and the Ringcast/reference ratio of the medians, then the targets as met or missed.
"""
import argparse
import contextlib
import glob
import json
import os
import statistics


def dig(record, path):
    value = record
    for key in path.split("/"):
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


# name, JSON path (or a function of the record), unit, decimals
FIGURES = {
    "cpu1000": ("server CPU per delivery", "server/cpuMsPer1000Deliveries", "µs", 3),
    "perCpuSecond": ("deliveries per server CPU-second", "server/deliveriesPerCpuSecond", "", 0),
    "cpu": ("server CPU while publishing", "server/cpuSeconds", "s", 3),
    "rate": ("deliveries/s", "deliveriesPerSecond", "", 0),
    "p50": ("latency p50", "latencyMs/p50", "ms", 2),
    "p90": ("latency p90", "latencyMs/p90", "ms", 2),
    "p99": ("latency p99", "latencyMs/p99", "ms", 2),
    "p999": ("latency p99.9", "latencyMs/p99.9", "ms", 2),
    "max": ("latency max", "latencyMs/max", "ms", 2),
    "perFrame": ("updates per frame", "eventsPerFrame", "", 2),
    "loss": ("loss", "lossPercent", "%", 3),
    "published": ("updates published", "published", "", 0),
    "expected": ("deliveries expected", "expected", "", 0),
    "delivered": ("deliveries", "delivered", "", 0),
    "dataFrames": ("frames with updates", "dataFrames", "", 0),
    "resyncs": ("resync snapshots", "resyncs", "", 0),
    "finalSeen": ("watchers that saw the final value", "finalValueSeenBy", "", 0),
    "connected": ("watchers connected", "connected", "", 0),
    "failed": ("watchers failed", "failed", "", 0),
    "connectSeconds": ("time to connect all", "connectSeconds", "s", 2),
    "rssPerWatcher": ("server memory per watcher", "server/rssPerWatcherKiB", "KiB", 2),
    "rss": ("server RSS with the watchers", lambda r: (dig(r, "server/rssKiB") or 0) / 1024, "MiB", 1),
    "rssBefore": ("server RSS before the watchers", lambda r: (dig(r, "server/rssBeforeKiB") or 0) / 1024, "MiB", 1),
    "connectCpu": ("server CPU while connecting", "server/connectCpuSeconds", "s", 3),
    "connectCpuPer": ("server CPU per connection (upgrade, hello, snapshot)", lambda r: (dig(r, "server/connectCpuSeconds") or 0) * 1e6 / r["connected"] if r.get("connected") else None, "µs", 1),
    "loadCpu": ("load generator CPU (share of one core)", lambda r: r["loadCpuSeconds"] / r["measuredSeconds"] * 100 if r.get("measuredSeconds") else None, "%", 0),
    "cpuPerPublished": ("server CPU per published update", lambda r: (dig(r, "server/cpuSeconds") or 0) * 1e6 / r["published"] if r.get("published") else None, "µs", 2),
}

SCENARIO_FIGURES = {
    "light": ["cpu1000", "perCpuSecond", "p50", "p90", "p99", "p999", "max", "rate", "perFrame", "loss", "connected", "failed", "loadCpu"],
    "fanout": ["cpu1000", "perCpuSecond", "rate", "p50", "p90", "p99", "p999", "max", "perFrame", "published", "loss", "failed", "loadCpu"],
    "serial": ["cpu1000", "perCpuSecond", "rate", "p50", "p99", "max", "perFrame", "published", "loss", "failed", "loadCpu"],
    "burst": ["perCpuSecond", "cpu1000", "cpu", "rate", "p50", "p99", "max", "perFrame", "loss", "failed", "loadCpu"],
    "wide": ["cpu1000", "perCpuSecond", "rate", "p50", "p99", "p999", "max", "perFrame", "published", "loss", "connected", "failed", "loadCpu"],
    "idle": ["connectCpuPer", "rssPerWatcher", "rss", "rssBefore", "connected", "failed", "connectSeconds", "connectCpu"],
    "conflation": ["published", "dataFrames", "resyncs", "finalSeen", "delivered", "expected", "cpu", "cpuPerPublished", "p50", "p99", "connected", "loadCpu"],
}

NAMES = {"light": "Light", "fanout": "Fan-out latency", "serial": "One POST at a time", "burst": "Burst", "wide": "Wide", "idle": "Idle", "conflation": "Conflation"}


def value_of(record, key):
    _, path, _, _ = FIGURES[key]
    value = path(record) if callable(path) else dig(record, path)
    return value if isinstance(value, (int, float)) else None


def fmt(value, decimals):
    if value is None:
        return "–"
    if decimals == 0:
        return f"{value:,.0f}".replace(",", " ")
    return f"{value:,.{decimals}f}".replace(",", " ")


def stats(records, key):
    values = [v for v in (value_of(r, key) for r in records) if v is not None]
    if not values:
        return None
    return statistics.median(values), min(values), max(values), len(values)


def cell(summary, decimals, rounds):
    if summary is None:
        return "–"
    median, low, high, count = summary
    text = fmt(median, decimals)
    if count > 1:
        text += f" ({fmt(low, decimals)}–{fmt(high, decimals)})"
    if count < rounds:
        text += f" [{count} of {rounds} runs]"
    return text


def ratio(a, b):
    if a is None or b is None or b[0] in (0, None):
        return None
    return a[0] / b[0]


def main():
    parser = argparse.ArgumentParser()
    for name in ["results", "output", "rounds", "quick", "command", "elapsed", "nproc", "cpu", "kernel", "date", "lws", "swift", "pinning", "fd-limit", "loadavg"]:
        parser.add_argument("--" + name, required=True)
    args = parser.parse_args()
    rounds = int(args.rounds)

    scenarios = []
    with open(os.path.join(args.results, "scenarios.tsv")) as table:
        for line in table:
            name, description, arguments, count = line.rstrip("\n").split("\t")
            scenarios.append((name, description, arguments, int(count)))

    runs = {}
    for path in glob.glob(os.path.join(args.results, "*.json")):
        name, server, _ = os.path.basename(path)[:-5].rsplit("-", 2)
        with open(path) as handle, contextlib.suppress(json.JSONDecodeError):
            runs.setdefault((name, server), []).append(json.load(handle))

    out = []
    out.append("# Benchmarks: Ringcast against the raw-libwebsockets reference")
    servers = ["ringcast", "ringcast2", "reference"] if any(server == "ringcast2" for _, server in runs) else ["ringcast", "reference"]
    out.append("")
    out.append(f"Written by `{args.command}` on {args.date}, {args.elapsed} s of runs"
               + (" (**quick mode: one round, shorter scenarios — development numbers only**)" if args.quick == "1" else "") + ".")
    out.append("")
    out.append("| machine | |")
    out.append("| --- | --- |")
    out.append(f"| CPUs (`nproc`) | {args.nproc} |")
    out.append(f"| CPU model | {args.cpu} |")
    out.append(f"| kernel | {args.kernel} |")
    out.append(f"| libwebsockets | {args.lws} |")
    out.append(f"| Swift | {args.swift} |")
    out.append(f"| pinning | {args.pinning} |")
    out.append(f"| open files (`ulimit -n`) | {args.fd_limit} |")
    out.append(f"| load average (1, 5, 15 min) | {args.loadavg} |")
    out.append("")
    out.append("How: every scenario runs Ringcast (`ringcast serve`, release build, default config but an empty public "
               "directory, once with `\"threads\": 1` and once with 2) and the reference (`Benchmarks/reference/refserver`, C on the same libwebsockets) one after "
               f"the other, {rounds} round{'s' if rounds != 1 else ''} alternating{' (some scenarios more: see their tables)' if any(c != rounds for *_, c in scenarios) else ''}, each server started fresh for each run, through the same "
               "`ringcast load` command on 127.0.0.1. Cells are the median over the rounds with min–max in parentheses; "
               "the ratio is Ringcast's median over the reference's. Server CPU time is read by the load tool from "
               "/proc for the server's pid (every thread's `schedstat`, nanoseconds; utime+stime from `/proc/PID/stat` "
               "would give the same at 10 ms resolution) from the start of publishing to the end of the drain, so it "
               "includes the kernel's loopback send path that the server's `send()` calls pay for. Latency is measured "
               "at every watcher from the publisher's send to delivery on the load process's one monotonic clock; "
               "percentiles are nearest-rank. The load tool counts updates (events), not frames: Ringcast may send "
               "several in one JSON array when a watcher is behind, the reference never does (except that it relays a "
               "WebSocket publisher's array frames as they are).")
    out.append("")

    # Targets first: they are what the run is for.
    def s(name, server, key):
        return stats(runs.get((name, server), []), key)

    targets = []
    # The targets: server CPU per delivery within 1.1 x of the reference in every fan-out scenario, and
    # connection set-up within 1.2 x (one service thread, like the reference).
    for name in ["light", "fanout", "serial", "wide"]:
        a, b = s(name, "ringcast", "cpu1000"), s(name, "reference", "cpu1000")
        if a and b:
            r = ratio(a, b)
            targets.append((f"{name}: server CPU per delivery", fmt(a[0], 3) + " µs", fmt(b[0], 3) + " µs", r, "≤ 1.1 ×", r <= 1.1))
    a, b = s("idle", "ringcast", "connectCpuPer"), s("idle", "reference", "connectCpuPer")
    if a and b:
        r = ratio(a, b)
        targets.append(("idle: server CPU per connection", fmt(a[0], 1) + " µs", fmt(b[0], 1) + " µs", r, "≤ 1.2 ×", r <= 1.2))
    light_frame = s("light", "ringcast", "perFrame")
    if light_frame:
        targets.append(("light: one update per frame", fmt(light_frame[0], 2), "1.00 (always)", None, "= 1", abs(light_frame[0] - 1) < 0.005))
    for key, label in [("p99", "light: p99 latency")]:
        a, b = s("light", "ringcast", key), s("light", "reference", key)
        if a and b:
            r = ratio(a, b)
            targets.append((label, fmt(a[0], FIGURES[key][3]) + " " + FIGURES[key][2], fmt(b[0], FIGURES[key][3]) + " " + FIGURES[key][2], r, "≤ 1.2 ×", r <= 1.2))
    a, b = s("burst", "ringcast", "perCpuSecond"), s("burst", "reference", "perCpuSecond")
    if a and b:
        r = ratio(a, b)
        targets.append(("burst: updates delivered per server CPU-second", fmt(a[0], 0), fmt(b[0], 0), r, "≥ 2 ×", r >= 2))
    a, b = s("idle", "ringcast", "rssPerWatcher"), s("idle", "reference", "rssPerWatcher")
    if a and b:
        r = ratio(a, b)
        targets.append(("idle: memory per connection", fmt(a[0], 2) + " KiB", fmt(b[0], 2) + " KiB", r, "≤ 1.5 ×", r <= 1.5))
    if targets:
        out.append("## Targets")
        out.append("")
        out.append("Ringcast here is the one-service-thread run (`\"threads\": 1`), like the reference's one thread.")
        out.append("")
        out.append("| target | Ringcast | reference | ratio | wanted | |")
        out.append("| --- | --- | --- | --- | --- | --- |")
        for label, mine, theirs, r, wanted, met in targets:
            out.append(f"| {label} | {mine} | {theirs} | {'–' if r is None else f'{r:.2f} ×'} | {wanted} | {'**met**' if met else '**missed**'} |")
        out.append("")

    for name, description, arguments, count in scenarios:
        out.append(f"## {NAMES.get(name, name)}: {description}")
        out.append("")
        out.append(f"{count} round{'s' if count != 1 else ''}; each cell: median (min–max).")
        out.append("")
        out.append(f"`ringcast load --url http://127.0.0.1:PORT --server-pid PID {arguments} --json`")
        out.append("")
        if len(servers) == 3:
            out.append("| figure | Ringcast, 1 thread | Ringcast, 2 threads | reference | 1 thread / reference | 2 threads / reference |")
            out.append("| --- | --- | --- | --- | --- | --- |")
        else:
            out.append("| figure | Ringcast | reference | Ringcast / reference |")
            out.append("| --- | --- | --- | --- |")
        for key in SCENARIO_FIGURES.get(name, []):
            label, _, unit, decimals = FIGURES[key]
            cells = [s(name, server, key) for server in servers]
            ratios = [ratio(c, cells[-1]) for c in cells[:-1]]
            out.append(f"| {label}{f' ({unit})' if unit else ''} | " + " | ".join(cell(c, decimals, count) for c in cells) + " | "
                       + " | ".join('–' if r is None else f'{r:.2f}' for r in ratios) + " |")
        missing = [server for server in servers if len(runs.get((name, server), [])) < count]
        if missing:
            out.append("")
            out.append(f"Runs that failed or were missing: {', '.join(missing)} (see Benchmarks/results/{name}-*.log).")
        out.append("")

    # Sections other scripts wrote into the results folder (costs.sh: pattern sets, age, storage).
    for extra in sorted(f for f in os.listdir(args.results) if f.endswith(".section.md")):
        with open(os.path.join(args.results, extra)) as handle:
            out.append(handle.read().rstrip())
            out.append("")

    notes = os.path.join(os.path.dirname(args.output), "NOTES.md")
    if os.path.exists(notes):
        with open(notes) as handle:
            out.append(handle.read().rstrip())
            out.append("")

    with open(args.output, "w") as handle:
        handle.write("\n".join(out))


if __name__ == "__main__":
    main()
