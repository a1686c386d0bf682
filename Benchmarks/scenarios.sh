#!/usr/bin/env bash
# Churn and a reconnect storm through `ringcast load` itself (--churn, --storm), against Ringcast
# (one service thread) and the raw-libwebsockets reference, rounds alternating, the server pinned
# to CPU 0 and the load generator to CPU 1:
#   - churn: 2 000 watchers, 100 updates/s over HTTP to 1 000 tasks for 10 s, 200 watchers a
#     second closed and each back after the dashboard's back-off, resuming with `since`;
#   - storm: 5 000 watchers, 50 updates/s over HTTP to 100 tasks for 10 s, every watcher closed
#     at once after 5 s and back the same way, timed until all are live again.
# The reference has no `since`: a watcher it takes back gets an empty snapshot, so what was
# published while it was away is lost; Ringcast's resume snapshot holds it (counted apart, not as
# deliveries). Prints a Markdown section on stdout; progress goes to stderr.
#
#   Benchmarks/scenarios.sh              # 2 rounds (about 3 minutes)
#   Benchmarks/scenarios.sh --quick      # 1 round, 1 000 / 2 000 watchers, 5 s runs
#   Benchmarks/scenarios.sh --summary    # the tables again from the runs already in the results folder
# Per-run JSON and logs are kept in Benchmarks/results/scenarios/.
. "$(dirname "$0")/lib.sh"
options="quick rounds=N summary"
parse_options "$@"
summary=${summary:-}
[ ${#rest[@]} -eq 0 ] || usage_error "unexpected argument ${rest[0]}"
rounds=${rounds:-$([ "$quick" = 1 ] && echo 1 || echo 2)}
if [ "$quick" = 1 ]; then
  churn_clients=1000 storm_clients=2000 duration=5
else
  churn_clients=2000 storm_clients=5000 duration=10
fi

churn_arguments=(--clients "$churn_clients" --rate 100 --tasks 1000 --duration "$duration" --publish http --churn 200 --drain-timeout 30)
storm_arguments=(--clients "$storm_clients" --rate 50 --tasks 100 --duration "$duration" --publish http --storm --drain-timeout 30)
results=Benchmarks/results/scenarios
if [ "$summary" != 1 ]; then
build_release ringcast
build_reference
fresh_results scenarios
ringcast_config "$work/ringcast.json" threads=1 heartbeatSeconds=3600

for round in $(seq "$rounds"); do
  for server in ringcast reference; do
    for scenario in churn storm; do
      start_by_name "$server"
      echo "$scenario-$server-$round (pid $server_pid)" >&2
      if [ "$scenario" = churn ]; then arguments=("${churn_arguments[@]}"); else arguments=("${storm_arguments[@]}"); fi
      run_load "$scenario-$server-$round" --url "$server_url" --server-pid "$server_pid" --quiet "${arguments[@]}" || true
      stop_server
      sleep 0.5
    done
  done
done
fi

rounds=$(find "$results" -name 'churn-ringcast-*.json' | wc -l)
python3 - "$results" "$rounds" "$churn_clients" "$storm_clients" "$duration" "${churn_arguments[*]}" "${storm_arguments[*]}" <<'PY'
import glob, json, statistics, sys
results, rounds, churn_clients, storm_clients, duration = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
sys.path.insert(0, "Benchmarks")
from runs import runs as runs_in  # noqa: E402 (the folder is on the path only now)
def runs(pattern):
    return runs_in(results, pattern)
def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None
def cell(values, digits=0):
    m = median(values)
    if m is None:
        return "–"
    text = f"{m:,.{digits}f}".replace(",", " ")
    present = [v for v in values if v is not None]
    if len(present) > 1:
        text += f" ({min(present):,.{digits}f}–{max(present):,.{digits}f})".replace(",", " ")
    return text
names = {"ringcast": "Ringcast, 1 thread", "reference": "raw-lws reference"}
print(f"`Benchmarks/scenarios.sh`: `ringcast load --churn` and `--storm`, {rounds} round{'s' if rounds > 1 else ''} alternating, "
      "each server started fresh, the server on CPU 0 and the load generator on CPU 1. Cells: median (min–max). "
      "*Back* is each closed watcher's time from its close to its resume snapshot, the dashboard's back-off "
      "(random in [0, min(15 s, 0.5 s·2^n))) included. *In resume snapshots*: updates a returning watcher held "
      "through its `since` snapshot instead of one by one (the reference has no `since`, so for it they are lost). "
      "Server CPU from /proc over publishing and the drain, every thread.\n")
for scenario, clients, arguments in (("churn", churn_clients, sys.argv[6]), ("storm", storm_clients, sys.argv[7])):
    count = f"{clients:,}".replace(",", " ")
    title = (f"Churn: {count} watchers, 200 closed a second for {duration} s while 100 updates/s go out" if scenario == "churn"
             else f"Storm: {count} watchers closed at once halfway through {duration} s of 50 updates/s")
    print(f"### {title}\n")
    print(f"`ringcast load --url http://127.0.0.1:PORT --server-pid PID {arguments} --json`\n")
    header = ["server", "closed", "back", "p50 back (ms)", "p99 back (ms)"]
    if scenario == "storm":
        header.append("until all live (s)")
    header += ["delivered", "in resume snapshots", "lost", "p99 latency (ms)", "server CPU (s)", "load generator CPU (% of a core)"]
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    for server in ("ringcast", "reference"):
        found = runs(f"{scenario}-{server}")
        r = [f.get("reconnects", {}) for f in found]
        row = [names[server], cell([x.get("closed") for x in r]), cell([x.get("back") for x in r]),
               cell([x.get("backMs", {}).get("p50") for x in r]), cell([x.get("backMs", {}).get("p99") for x in r])]
        if scenario == "storm":
            row.append(cell([x.get("allLiveSeconds") for x in r], 2))
        row += [cell([f.get("delivered") for f in found]), cell([x.get("resumedUpdates") for x in r]), cell([f.get("loss") for f in found]),
                cell([f.get("latencyMs", {}).get("p99") for f in found], 2),
                cell([f.get("server", {}).get("cpuSeconds") for f in found], 2),
                cell([f["loadCpuSeconds"] / f["measuredSeconds"] * 100 if f.get("measuredSeconds") else None for f in found])]
        print("| " + " | ".join(row) + " |")
    print()
PY
