#!/usr/bin/env bash
# What the load generator itself costs: `ringcast load` (--threads 1 and 2) beside
# Benchmarks/epoll-load (C, one epoll thread, no libwebsockets) on the fan-out rows of
# Benchmarks/independent.sh, against Ringcast on one service thread, the server pinned to CPU 0 and
# the generator to CPU 1, rounds alternating. Each generator reads its own CPU time (getrusage)
# over the same window, from the first publish to the end of the drain, publisher included: its
# CPU per delivery is the figure that compares them. With --threads 2, each watcher thread's share
# of a core (its schedstat) beside the one thread's. Prints Markdown on stdout; progress on stderr.
#
#   Benchmarks/generator.sh              # 3 rounds of 10 s runs (about 5 minutes)
#   Benchmarks/generator.sh --quick      # 1 round of 4 s runs
#   Benchmarks/generator.sh --summary    # the table again from the runs already in the results folder
# Per-run JSON and logs are kept in Benchmarks/results/generator/.
. "$(dirname "$0")/lib.sh"
options="quick rounds=N summary"
parse_options "$@"
summary=${summary:-}
[ ${#rest[@]} -eq 0 ] || usage_error "unexpected argument ${rest[0]}"
rounds=${rounds:-$([ "$quick" = 1 ] && echo 1 || echo 3)}
seconds=$([ "$quick" = 1 ] && echo 4 || echo 10)

results=Benchmarks/results/generator
if [ "$summary" != 1 ]; then
build_release ringcast
build_epoll_load
fresh_results generator
ringcast_config "$work/ringcast.json" threads=1 heartbeatSeconds=3600

# NAME|WATCHERS|RATE: epoll-load's fan-out rows; every update to a task of its own, 120 bytes.
rows=("medium|1000|100" "wide|5000|50")
for round in $(seq "$rounds"); do
  for row in "${rows[@]}"; do
    IFS='|' read -r name watchers rate <<<"$row"
    messages=$((rate * seconds))
    for tool in epoll threads1 threads2; do
      start_ringcast ringcast "$work/ringcast.json"
      tag=$name-$tool-$round
      echo "$tag (pid $server_pid)" >&2
      if [ "$tool" = epoll ]; then
        "${pin_load[@]}" "$epoll_load" --port "$server_port" --pid "$server_pid" --watchers "$watchers" --rate "$rate" \
          --messages "$messages" >"$results/$tag.json" 2>"$results/$tag.log" \
          || { echo "  $tag failed: $(tail -1 "$results/$tag.log")" >&2; rm -f "$results/$tag.json"; }
      else
        run_load "$tag" --url "$server_url" --server-pid "$server_pid" --quiet --clients "$watchers" --rate "$rate" \
          --messages "$messages" --tasks "$messages" --payload-bytes 120 --publish http --threads "${tool#threads}" || true
      fi
      stop_server
      sleep 0.5
    done
  done
done
fi

python3 - "$results" <<'PY'
import glob, json, statistics, sys
results = sys.argv[1]
rounds = len(glob.glob(f"{results}/medium-epoll-*.json"))
sys.path.insert(0, "Benchmarks")
from runs import runs as runs_in  # noqa: E402 (the folder is on the path only now)
def runs(pattern):
    return runs_in(results, pattern)
def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None
def cell(values, digits=2):
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    text = f"{statistics.median(values):.{digits}f}"
    return text + (f" ({min(values):.{digits}f}–{max(values):.{digits}f})" if len(values) > 1 else "")
def per_delivery(run):
    if "loadCpuUsPerDelivery" in run:
        return run["loadCpuUsPerDelivery"]
    return run["loadCpuSeconds"] * 1e6 / run["delivered"] if run.get("delivered") else None
def thread_seconds(run):
    if "epollThreadCpuSeconds" in run:
        return [run["epollThreadCpuSeconds"]]
    return run.get("watcherThreadCpuSeconds") or []
def shares(run):
    if "epollThreadCpuSeconds" in run:
        return [run["epollThreadCpuSeconds"] / run["seconds"] * 100]
    return [t / run["measuredSeconds"] * 100 for t in (run.get("watcherThreadCpuSeconds") or [])]
print(f"`Benchmarks/generator.sh`: {rounds} round{'s' if rounds > 1 else ''} alternating, each row's updates at its rate "
      "(10 s of them; longer when the server, sharing its core, took them slower), Ringcast on one service thread pinned to "
      "CPU 0, the generator on CPU 1; 120-byte updates over HTTP, each to a task of its own. Generator CPU: its own getrusage "
      "over the first publish to the end of the drain, publisher included. Watcher threads: each one's CPU time "
      "(schedstat; epoll-load: its epoll thread's getrusage) and its share of a core over that window. Cells: median (min–max).\n")
print("| row | generator | generator CPU per delivery (µs) | / epoll-load | watcher thread(s), CPU s each | "
      "watcher thread(s), % of a core each | server CPU per delivery (µs) | p99 latency (ms) | delivered of expected |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for name, label in (("medium", "1 000 watchers, 100 msg/s"), ("wide", "5 000 watchers, 50 msg/s")):
    base = median([per_delivery(r) for r in runs(f"{name}-epoll")])
    for tool, tool_label in (("epoll", "epoll-load"), ("threads1", "ringcast load --threads 1"), ("threads2", "ringcast load --threads 2")):
        found = runs(f"{name}-{tool}")
        cost = [per_delivery(r) for r in found]
        m = median(cost)
        ratio = f"{m / base:.2f}" if m is not None and base else "–"
        thread_shares = [shares(r) for r in found]
        width = max((len(s) for s in thread_shares), default=0)
        share_text = ", ".join(cell([s[i] if i < len(s) else None for s in thread_shares], 0) for i in range(width)) or "–"
        seconds_each = [thread_seconds(r) for r in found]
        seconds_text = ", ".join(cell([s[i] if i < len(s) else None for s in seconds_each], 2) for i in range(width)) or "–"
        server = [r.get("cpuUsPerDelivery") or (r.get("server", {}) or {}).get("cpuMsPer1000Deliveries") for r in found]
        p99 = [r.get("latencyP99Ms") or (r.get("latencyMs", {}) or {}).get("p99") for r in found]
        counts = ", ".join(f"{r.get('delivered')}/{r.get('expected')}" for r in found)
        print(f"| {label} | {tool_label} | {cell(cost)} | {ratio} | {seconds_text} | {share_text} | {cell(server)} | {cell(p99)} | {counts} |")
PY
