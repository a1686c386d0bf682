#!/usr/bin/env bash
# Reconnect storms, piece by piece, through Benchmarks/epoll-load (C, no libwebsockets), the server
# pinned to CPU 0 and the generator to CPU 1, rounds alternating between the servers:
#   - connect + close: with N watchers held, 1 000 more connect one batch at a time, each waits
#     for its snapshot (for Nchan, which sends none: its upgrade) and closes; the server's CPU per
#     watcher, at three sizes, for Ringcast (one service thread), the raw-libwebsockets reference
#     and Nchan where it is installed (apt-get install libnginx-mod-nchan);
#   - the snapshot: the same with no watcher held and 0, 1 000 or 10 000 tasks held, and the
#     snapshot's size on the wire, with permessage-deflate (config compression) off and on;
#   - a fan-out row with compression off and on: 1 000 watchers, 100 updates/s over HTTP, the
#     server's CPU per delivery (the generator inflates what it gets, to count the updates);
#   - the storm: 5 000 watchers (quick: 1 000) live with 10 000 or 100 tasks held (SQLite, so the
#     tasks survive a restart); the server restarted with SIGTERM, or every watcher's socket reset
#     at once (a network blip); the watchers come back with the dashboard's back-off and since:
#     time until all are live again, p50/p99 of each one's time back, and the server's CPU.
# Ringcast runs with heartbeatSeconds 3600 here: a heartbeat to every held watcher would land in
# some runs' window and not others' (neither the reference nor Nchan sends one). Prints Markdown
# (Benchmarks/run puts it in RESULTS.md); progress goes to stderr.
#
#   Benchmarks/storms.sh            # held 2 500 / 10 000 / 19 000, 2 rounds
#   Benchmarks/storms.sh --quick    # held 500 / 2 000 / 4 000, 1 round
#   Benchmarks/storms.sh --rounds 3
#   Benchmarks/storms.sh --only connect --before OLD_RINGCAST   # only the connect + close table,
#       with an older ringcast binary measured beside this tree's in the same rounds
#   Benchmarks/storms.sh --churn 4000   # watchers that connect and close per connect run (default
#       1 000): a longer phase, less at the mercy of whatever else the machine did meanwhile
# --only takes a comma-separated list of parts: connect, fanout, snapshot, storm (default: all).
. "$(dirname "$0")/lib.sh"
options="quick rounds=N only= before= churn=N"
parse_options "$@"
[ ${#rest[@]} -eq 0 ] || usage_error "unexpected argument ${rest[0]}"
rounds=${rounds:-$([ "$quick" = 1 ] && echo 1 || echo 2)}
only=${only:-connect,fanout,snapshot,storm}
for part in ${only//,/ }; do
  case "$part" in connect | fanout | snapshot | storm) ;; *) usage_error "--only takes connect, fanout, snapshot or storm, not '$part'" ;; esac
done
part() { [[ ",$only," == *",$1,"* ]]; }
[ -z "$before" ] || [ -x "$before" ] || usage_error "$before is not an executable ringcast binary; build the older commit first"

build_release ringcast
build_reference
build_epoll_load
fresh_results storms
ringcast_config "$work/ringcast.json" threads=1 heartbeatSeconds=3600
ringcast_config "$work/deflating.json" threads=1 heartbeatSeconds=3600 compression=true

asked_churn=${churn:-}
if [ "$quick" = 1 ]; then held_sizes=(500 2000 4000); churn=300; storm_watchers=1000; else held_sizes=(2500 10000 19000); churn=1000; storm_watchers=5000; fi
churn=${asked_churn:-$churn}
storm_tasks=(10000 100)
task_counts=(0 1000 10000)
servers=(ringcast reference)
[ -z "$before" ] || servers=(before "${servers[@]}")
if have_nchan; then servers+=(nchan); else echo "$script: no Nchan (apt-get install libnginx-mod-nchan adds it)" >&2; fi

# run_epoll TAG SERVER GENERATOR-OPTION…: one epoll-load run against a fresh SERVER.
run_epoll() {
  local tag=$1 server=$2
  shift 2
  if [ "$server" = before ]; then start_ringcast before "$work/ringcast.json" "$before"; else start_by_name "$server"; fi
  echo "$tag ($server, pid $server_pid)" >&2
  "${pin_load[@]}" "$epoll_load" --port "$server_port" --pid "$server_pid" "$@" >"$results/$tag.json" 2>"$results/$tag.log" \
    || { echo "  $tag failed: $(tail -1 "$results/$tag.log")" >&2; rm -f "$results/$tag.json"; }
  stop_server
  sleep 0.5 # let the kernel retire the closed sockets before the next server starts
}

for round in $(seq "$rounds"); do
  for held in "${held_sizes[@]}"; do
    part connect || break
    for server in "${servers[@]}"; do
      until=snapshot
      [ "$server" = nchan ] && until=upgrade
      run_epoll "connect-$held-$server-$round" "$server" --watchers "$held" --churn "$churn" --churn-until "$until"
    done
  done
  messages=$([ "$quick" = 1 ] && echo 200 || echo 500)
  if part fanout; then
    run_epoll "fanout-ringcast-$round" ringcast --watchers 1000 --rate 100 --messages "$messages"
    run_epoll "fanout-deflating-$round" deflating --watchers 1000 --rate 100 --messages "$messages" --deflate
  fi
  for tasks in "${task_counts[@]}"; do
    part snapshot || break
    run_epoll "snapshot-$tasks-ringcast-$round" ringcast --watchers 0 --tasks "$tasks" --churn "$churn"
    run_epoll "snapshot-$tasks-deflating-$round" deflating --watchers 0 --tasks "$tasks" --churn "$churn" --deflate
  done
done

# storm MODE TASKS: one storm against a server on a fixed port with its own SQLite file; for a
# restart, SIGTERM and a new server on the same port once every watcher is live.
storm() {
  local mode=$1 tasks=$2 tag="storm-$1-$2-1" ready=$work/ready pidfile=$work/storm.pid generator step
  rm -f "$work/storm.db"* "$ready"
  ringcast_config "$work/storm.json" threads=1 port="$(free_port)" storage="$work/storm.db" maxConnectionsPerAddress=0
  start_ringcast storm "$work/storm.json"
  echo "$server_pid" >"$pidfile"
  echo "$tag ($storm_watchers watchers, pid $server_pid)" >&2
  "${pin_load[@]}" "$epoll_load" --port "$server_port" --pid "$server_pid" --watchers "$storm_watchers" --tasks "$tasks" \
    --storm "$mode" --pid-file "$pidfile" --ready-file "$ready" >"$results/$tag.json" 2>"$results/$tag.log" &
  generator=$!
  for step in $(seq 3000); do
    [ -f "$ready" ] && break
    kill -0 "$generator" 2>/dev/null || break
    sleep 0.1
  done
  if [ "$mode" = restart ] && [ -f "$ready" ]; then
    stop_server
    start_ringcast storm "$work/storm.json"
    echo "$server_pid" >"$pidfile"
  fi
  wait "$generator" || { echo "  $tag failed: $(tail -1 "$results/$tag.log")" >&2; rm -f "$results/$tag.json"; }
  stop_server
  sleep 0.5
}
for tasks in "${storm_tasks[@]}"; do
  part storm || break
  storm restart "$tasks"
  storm cut "$tasks"
done

python3 - "$results" "$rounds" "$quick" "$churn" "${held_sizes[*]}" "${task_counts[*]}" "${servers[*]}" "$storm_watchers" "${storm_tasks[*]}" "$only" <<'PY'
import glob, json, statistics, sys
only = sys.argv[10].split(",")
results, rounds, quick, churn = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", int(sys.argv[4])
held_sizes, task_counts, servers = (list(map(int, sys.argv[5].split())), list(map(int, sys.argv[6].split())), sys.argv[7].split())
sys.path.insert(0, "Benchmarks")
from runs import paired_ratio, runs as runs_in  # noqa: E402 (the folder is on the path only now)
def runs(pattern):
    return runs_in(results, pattern)
def median(pattern, key):
    values = [r[key] for r in runs(pattern) if key in r]
    return statistics.median(values) if values else None
show = lambda v, d=0: "–" if v is None else f"{v:,.{d}f}".replace(",", " ")
ratio = lambda a, b: "–" if a is None or not b else f"{a / b:.2f}"
names = {"ringcast": "Ringcast, 1 thread", "reference": "raw-lws reference", "nchan": "Nchan", "before": "Ringcast before (--before), 1 thread"}
print(f"`Benchmarks/storms.sh{' --quick' if quick else ''}`: Benchmarks/epoll-load, {churn} watchers connecting "
      f"{32} at a time, each closing once it has its snapshot (Nchan: its upgrade); server CPU from /proc over "
      f"that phase, per watcher (µs); median of {rounds} alternating round{'s' if rounds > 1 else ''}.\n")
if "connect" in only:
    print("### Connect + close, by connections held\n")
    header = ["server"] + [f"{show(h)} held" for h in held_sizes] + [f"{show(held_sizes[-1])} / {show(held_sizes[0])}"]
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    cpu = {}
    for server in servers:
        row = [median(f"connect-{h}-{server}", "churnCpuUsPerConnection") for h in held_sizes]
        cpu[server] = row
        print("| " + " | ".join([names[server]] + [show(v) for v in row] + [ratio(row[-1], row[0])]) + " |")
    for other in ("before", "reference", "nchan"):
        if other in cpu:
            print("| " + " | ".join([f"Ringcast / {names[other]}"] + [ratio(a, b) for a, b in zip(cpu["ringcast"], cpu[other])] + [""]) + " |")
    if "before" in cpu:
        # The rounds' own ratios: the two builds' runs of a round follow one another.
        cells = []
        for h in held_sizes:
            pair = paired_ratio(results, f"connect-{h}-ringcast", f"connect-{h}-before", lambda r: r["churnCpuUsPerConnection"])
            cells.append("–" if pair is None else f"{pair[0]:.2f} ({pair[1]:.2f}–{pair[2]:.2f})")
        print("| " + " | ".join([f"Ringcast / {names['before']}, median of the rounds' ratios (their range)"] + cells + [""]) + " |")
if "snapshot" in only:
    print("\n### The snapshot: connect + close by tasks held (no other watcher held)\n")
    print("| tasks held | " + " | ".join(show(t) for t in task_counts) + " |")
    print("|" + " --- |" * (len(task_counts) + 1))
    print("| server CPU per watcher connect + close (µs) | " + " | ".join(show(median(f"snapshot-{t}-ringcast", "churnCpuUsPerConnection")) for t in task_counts) + " |")
    print("| snapshot frame (bytes) | " + " | ".join(show(median(f"snapshot-{t}-ringcast", "snapshotBytes")) for t in task_counts) + " |")
    print("| time for all of them (s) | " + " | ".join(show(median(f"snapshot-{t}-ringcast", "churnSeconds"), 2) for t in task_counts) + " |")
    print("| with compression: server CPU per connect + close (µs) | " + " | ".join(show(median(f"snapshot-{t}-deflating", "churnCpuUsPerConnection")) for t in task_counts) + " |")
    print("| with compression: snapshot on the wire (bytes) | " + " | ".join(show(median(f"snapshot-{t}-deflating", "snapshotBytes")) for t in task_counts) + " |")
if "fanout" in only:
    print("\n### Fan-out with and without compression: 1 000 watchers, 100 updates/s over HTTP\n")
    print("| compression | server CPU per delivery (µs) | p50 latency (ms) | p99 latency (ms) |")
    print("| --- | --- | --- | --- |")
    for name, label in (("ringcast", "off"), ("deflating", "on (every watcher asked for it)")):
        print(f"| {label} | " + " | ".join([show(median(f"fanout-{name}", "cpuUsPerDelivery"), 2), show(median(f"fanout-{name}", "latencyP50Ms"), 2),
                                            show(median(f"fanout-{name}", "latencyP99Ms"), 2)]) + " |")
if "storm" in only:
    print(f"\n### The storm: {show(int(sys.argv[8]))} watchers lose their sockets and come back\n")
    print("The dashboard's back-off (a delay random in [0, min(15 s, 0.5 s·2^n))), resuming with `since`; "
          "the tasks in SQLite, so they survive the restart. Restart: SIGTERM (every watcher gets a 1001), a new server "
          "on the same port, its CPU from its start (loading the tasks included). Cut: every watcher's socket reset at once "
          "by the generator, the server's CPU from the cut. One run each.\n")
    print("| storm | tasks held | until all live (s) | p50 back (ms) | p99 back (ms) | server CPU (s) | per watcher (ms) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for tasks in map(int, sys.argv[9].split()):
        for mode in ("restart", "cut"):
            found = runs(f"storm-{mode}-{tasks}")
            r = found[0] if found else {}
            print(f"| {'SIGTERM and restart' if mode == 'restart' else 'network cut, since resume'} | {show(tasks)} | "
                  + " | ".join([show(r.get("allLiveSeconds"), 2), show(r.get("liveP50Ms")), show(r.get("liveP99Ms")),
                                show(r.get("serverCpuSeconds"), 2), show(r.get("serverCpuMsPerWatcher"), 3)]) + " |")
PY
