#!/usr/bin/env bash
# The coalescing window (flushMilliseconds) against the raw-libwebsockets reference: 1 000 watchers,
# a WebSocket publisher at 500 updates/s round-robin over 10 tasks, against Ringcast with
# flushMilliseconds 16 and 0 and against Benchmarks/reference (which relays every update to every
# watcher); and, for an unbatched latency, Ringcast without a window at 100 updates/s (one update
# per frame). Rounds alternate, the server pinned to CPU 0 and `ringcast load` to CPU 1. Prints a
# Markdown section on stdout (Benchmarks/run puts it in RESULTS.md); progress goes to stderr.
#
#   Benchmarks/coalesce.sh              # 3 rounds of 10 s runs (about 3 minutes)
#   Benchmarks/coalesce.sh --quick      # 1 round of 3 s runs (about 1 minute)
#   Benchmarks/coalesce.sh --rounds 5 --window 33
# Per-run JSON and logs are kept in Benchmarks/results/coalesce/.
. "$(dirname "$0")/lib.sh"
options="quick rounds=N window=N"
parse_options "$@"
[ ${#rest[@]} -eq 0 ] || usage_error "unexpected argument ${rest[0]}"
rounds=${rounds:-$([ "$quick" = 1 ] && echo 1 || echo 3)}
window=${window:-16}
duration=$([ "$quick" = 1 ] && echo 3 || echo 10)
clients=1000
rate=500
tasks=10
load_arguments="--clients $clients --rate RATE --tasks $tasks --duration $duration --publish ws --latest-value"

build_release ringcast
build_reference
fresh_results coalesce
ringcast_config "$work/window.json" flushMilliseconds="$window"
ringcast_config "$work/nowindow.json"

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for round in $(seq "$rounds"); do
  # name:server:rate (nowindow100 is the unbatched latency: one update per frame)
  for run in window:window:$rate nowindow:nowindow:$rate reference:reference:$rate nowindow100:nowindow:100; do
    IFS=: read -r name server run_rate <<< "$run"
    start_by_name "$server"
    echo "coalesce round $round: $name (pid $server_pid, port $server_port)" >&2
    # shellcheck disable=SC2086
    run_load "$name-$round" --url "$server_url" --server-pid "$server_pid" ${load_arguments/RATE/$run_rate} --quiet || true
    stop_server
    sleep 0.5 # let the kernel retire the closed sockets before the next server starts
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$results" "$rounds" "$window" "$quick" "$load_arguments" "$load_before" "$load_after" <<'PY'
import glob, json, os, statistics, sys
sys.path.insert(0, "Benchmarks")
from summarize import dig, fmt, cell as summary_cell  # formatted as Benchmarks/run's tables are

results, rounds, window, quick, arguments, load_before, load_after = sys.argv[1:]
rounds, window = int(rounds), float(window)
runs = {}
for path in glob.glob(os.path.join(results, "*.json")):
    server = os.path.basename(path).rsplit("-", 1)[0]
    try:
        with open(path) as handle:
            runs.setdefault(server, []).append(json.load(handle))
    except json.JSONDecodeError:
        pass

def per_watcher_second(record):
    seconds, connected = record.get("publishSeconds"), record.get("connected")
    return record["dataFrames"] / connected / seconds if seconds and connected else None

def load_share(record):
    return record["loadCpuSeconds"] / record["measuredSeconds"] * 100 if record.get("measuredSeconds") else None

FIGURES = [
    # label, value of a run, decimals
    ("server CPU per published update (µs)", lambda r: dig(r, "server/cpuUsPerPublished"), 1),
    ("server CPU per delivered update (µs)", lambda r: dig(r, "server/cpuMsPer1000Deliveries"), 2),
    ("frames with updates, per watcher per second", per_watcher_second, 1),
    ("updates per frame", lambda r: r.get("eventsPerFrame"), 2),
    ("updates delivered (all watchers)", lambda r: r.get("delivered"), 0),
    ("latency p50, of the updates delivered (ms)", lambda r: dig(r, "latencyMs/p50"), 1),
    ("latency p99, of the updates delivered (ms)", lambda r: dig(r, "latencyMs/p99"), 1),
    ("latest-value latency p50 (ms)", lambda r: dig(r, "latestValueLatencyMs/p50"), 1),
    ("latest-value latency p99 (ms)", lambda r: dig(r, "latestValueLatencyMs/p99"), 1),
    ("latest-value latency max (ms)", lambda r: dig(r, "latestValueLatencyMs/max"), 1),
    ("watcher × task pairs without the task's last update at the end", lambda r: r.get("staleAtEnd"), 0),
    ("watchers connected", lambda r: r.get("connected"), 0),
    ("load generator CPU (% of one core)", load_share, 0),
]

def stats(server, figure):
    values = [v for v in (figure(r) for r in runs.get(server, [])) if isinstance(v, (int, float))]
    return (statistics.median(values), min(values), max(values), len(values)) if values else None

def cell(summary, decimals):
    return summary_cell(summary, decimals, rounds)

SERVERS = [("window", f"Ringcast, flushMilliseconds {window:g}"), ("nowindow", "Ringcast, flushMilliseconds 0"),
           ("reference", "reference (relays every update)"), ("nowindow100", "Ringcast, flushMilliseconds 0, at 100 updates/s")]
out = []
out.append(f"### The coalescing window: {fmt(1000, 0)} watchers, 500 updates/s over 10 tasks, flushMilliseconds {window:g}")
out.append("")
out.append(f"`Benchmarks/coalesce.sh{' --quick' if quick == '1' else ''}`: {rounds} round{'s' if rounds != 1 else ''} alternating, "
           f"each server started fresh, the server on CPU 0 and the load generator on CPU 1; every run is "
           f"`ringcast load --url http://127.0.0.1:PORT --server-pid PID {arguments.replace('RATE', '500')} --json` "
           f"(the last column: `--rate 100`, the same load without a window at a rate sent one update per frame, for an "
           f"unbatched latency). Load average (1, 5, 15 min): "
           f"{load_before} before, {load_after} after. Cells: median (min–max). *Latest-value latency* is, for every update "
           f"and watcher, the time until the watcher held that update or a newer one of its task: the latency of what a "
           f"window merges away as well as of what it sends. Server CPU is summed over the server's threads from the start "
           f"of publishing to the end of the drain.")
out.append("")
out.append("| figure | " + " | ".join(name for _, name in SERVERS) + " |")
out.append("| --- |" + " --- |" * len(SERVERS))
for label, figure, decimals in FIGURES:
    out.append(f"| {label} | " + " | ".join(cell(stats(server, figure), decimals) for server, _ in SERVERS) + " |")
out.append("")

targets = []
mine = stats("window", FIGURES[0][1])
theirs = stats("reference", FIGURES[1][1])
if mine and theirs:
    budget = theirs[0] * 1000
    targets.append(("server CPU per published update, with the window", f"{fmt(mine[0], 1)} µs",
                    f"≥ 3 × below the reference's CPU per delivery × 1 000 = {fmt(budget, 0)} µs",
                    f"{budget / mine[0]:.1f} × below", budget / mine[0] >= 3))
with_window = stats("window", FIGURES[8][1])

def p99_within_the_window_of(label, baseline_name, baseline):
    """The window's latest-value p99 against `baseline`'s p99 plus the window itself."""
    if not (with_window and baseline):
        return
    limit = window + baseline[0]
    targets.append((label, f"{fmt(with_window[0], 1)} ms",
                    f"≤ the window + {baseline_name} = {window:g} + {fmt(baseline[0], 1)} ms",
                    f"{fmt(limit - with_window[0], 1)} ms to spare" if with_window[0] <= limit else f"{fmt(with_window[0] - limit, 1)} ms over",
                    with_window[0] <= limit))

p99_within_the_window_of("p99 latency (latest value), with the window, against none at the same load",
                         "p99 without it", stats("nowindow", FIGURES[8][1]))
p99_within_the_window_of("p99 latency (latest value), with the window, against one update per frame at 100/s",
                         "that p99", stats("nowindow100", FIGURES[8][1]))
frames = stats("window", FIGURES[2][1])
if frames:
    targets.append(("frames per watcher per second, with the window", fmt(frames[0], 1),
                    f"≤ one per window: 1000 / {window:g} = {1000 / window:.1f}", "", frames[0] <= 1000 / window))
stale = stats("window", FIGURES[10][1])
if stale:
    targets.append(("watchers missing a task's last update at the end, with the window", fmt(stale[2], 0) + " (worst run)", "0", "", stale[2] == 0))
if targets:
    out.append("| target | measured | wanted | | |")
    out.append("| --- | --- | --- | --- | --- |")
    for label, measured, wanted, margin, met in targets:
        out.append(f"| {label} | {measured} | {wanted} | {margin} | {'**met**' if met else '**missed**'} |")
    out.append("")
missing = [name for server, name in SERVERS if len(runs.get(server, [])) < rounds]
if missing:
    out.append(f"Runs that failed or were missing: {', '.join(missing)} (see Benchmarks/results/coalesce/*.log).")
    out.append("")
print("\n".join(out))
PY
