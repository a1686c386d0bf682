#!/usr/bin/env bash
# Delivery latency across the nodes of a cluster against one node alone, and how many published
# events a second the cluster takes (one to three nodes, one update per request and batches of
# 100) against one node on memory and against redis-benchmark's ceiling on the same Redis, with
# the Redis commands each event costs. Starts a redis-server of its own and release builds of
# Ringcast, all on 127.0.0.1, and prints Markdown (Benchmarks/run puts it in RESULTS.md). The
# servers and redis-server share CPU 0, the load generator has CPU 1. Per-run JSON and logs are
# kept in Benchmarks/results/cluster/.
#
#   Benchmarks/cluster.sh            # 1 000 watchers, 100 updates/s for 10 s, 3 rounds
#   Benchmarks/cluster.sh --quick    # 1 000 watchers, 100 updates/s for 3 s, 1 round
#   Benchmarks/cluster.sh --rounds 5
. "$(dirname "$0")/lib.sh"
options="quick rounds=N"
parse_options "$@"
[ ${#rest[@]} -eq 0 ] || usage_error "unexpected argument ${rest[0]}"
# shellcheck disable=SC2154 # parse_options sets quick (printf -v)
if [ "$quick" = 1 ]; then seconds=3; else seconds=10; fi
rounds=${rounds:-$([ "$quick" = 1 ] && echo 1 || echo 3)}

command -v redis-server >/dev/null || fail "redis-server is missing (scripts/deps.sh test installs it)"
build_release ringcast ringcast-costs
fresh_results cluster

# redis-server cannot be told to pick a port, so it is given a free one; it shares CPU 0 with the nodes.
redis_port=$(free_port)
"${pin_server[@]}" redis-server --bind 127.0.0.1 --port "$redis_port" --save "" --appendonly no --dir "$work" \
    >"$work/redis.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do redis-cli -p "$redis_port" ping 2>/dev/null | grep -q PONG && break; sleep 0.05; done
redis-cli -p "$redis_port" ping 2>/dev/null | grep -q PONG || fail "redis-server did not start: $(cat "$work/redis.out")"

ringcast_config "$work/alone.json" logLevel=error threads=1 storage=state.db
ringcast_config "$work/node.json" logLevel=error threads=1 "storage=redis://127.0.0.1:$redis_port"
ringcast_config "$work/memory.json" logLevel=error threads=1

load="--clients 1000 --rate 100 --duration $seconds --tasks 1000 --publish http --quiet"
# run NAME WATCH_URL PUBLISH_URL: one `ringcast load` run, its JSON in $results/NAME.json.
run() {
    # shellcheck disable=SC2086
    run_load "$1" --url "$2" --publish-to "$3" $load || exit 1
}

for round in $(seq "$rounds"); do
    start_ringcast alone "$work/alone.json"
    run "alone-$round" "$server_url" "$server_url"
    stop_server
    redis-cli -p "$redis_port" flushall >/dev/null
    start_ringcast a "$work/node.json"; a_url=$server_url; a_pid=$server_pid
    start_ringcast b "$work/node.json"; b_url=$server_url; b_pid=$server_pid
    start_ringcast c "$work/node.json"; c_pid=$server_pid
    run "same-$round" "$b_url" "$b_url"
    run "across-$round" "$b_url" "$a_url"
    stop_server "$a_pid"; stop_server "$b_pid"; stop_server "$c_pid"
done

echo "### Delivery across the nodes of a cluster"
echo
echo "\`Benchmarks/cluster.sh$([ "$quick" = 1 ] && echo " --quick")\`: one redis-server 7 of its own and three \`ringcast serve\` nodes"
echo "on \`\"storage\": \"redis://…\"\` (one service thread each), all on CPU 0, against one node alone on SQLite;"
echo "\`ringcast load --json $load\` on CPU 1, watchers on node B. $rounds round(s); medians."
echo
python3 - "$results" "$rounds" <<'PY'
import json, statistics, sys
results, rounds = sys.argv[1], int(sys.argv[2])
def figures(name):
    runs = [json.load(open(f"{results}/{name}-{r}.json")) for r in range(1, rounds + 1)]
    pick = lambda key: statistics.median(run["latencyMs"][key] for run in runs)
    return pick("p50"), pick("p99"), sum(run["loss"] for run in runs), sum(run["delivered"] for run in runs)
alone = figures("alone")
rows = [("one node alone (SQLite), publish to it", alone),
        ("cluster: publish to node B, watchers on B", figures("same")),
        ("cluster: publish to node A, watchers on B", figures("across"))]
print("| path of an update | p50 (ms) | p99 (ms) | p50 / alone | p99 / alone | lost of delivered |")
print("| --- | --- | --- | --- | --- | --- |")
for label, (p50, p99, lost, delivered) in rows:
    print(f"| {label} | {p50:.2f} | {p99:.2f} | {p50 / alone[0]:.2f} | {p99 / alone[1]:.2f} | {lost} of {delivered} |")
PY

# Throughput: 4 connections (threads of ringcast-costs on CPU 1) spread over the nodes, against one
# node on memory; Redis's commands counted from INFO commandstats around each run.
if [ "$quick" = 1 ]; then single=4000; batched=400; else single=20000; batched=2000; fi
redis_calls() { redis-cli -p "$redis_port" info commandstats | python3 -c 'import re, sys; print(sum(int(n) for n in re.findall(r"calls=(\d+)", sys.stdin.read())))'; }
# measure TAG SIZE URL…: one throughput run, its JSON (with Redis's commands) in $results/TAG.json.
measure() {
  local tag=$1 size=$2 before
  shift 2
  local servers=()
  for url in "$@"; do servers+=(--server "$url"); done
  before=$(redis_calls)
  "${pin_load[@]}" "$bin/ringcast-costs" throughput "${servers[@]}" --connections 4 --batch-size "$size" \
      --requests "$([ "$size" = 1 ] && echo "$single" || echo "$batched")" >"$results/$tag.raw" 2>"$results/$tag.log" \
      || fail "$tag: $(tail -n 1 "$results/$tag.log")"
  python3 -c 'import json, sys; run = json.load(open(sys.argv[1])); run["redisCalls"] = int(sys.argv[2]); print(json.dumps(run))' \
      "$results/$tag.raw" "$(($(redis_calls) - before))" >"$results/$tag.json"
}
for round in $(seq "$rounds"); do
  start_ringcast memory "$work/memory.json"
  measure "memory-single-$round" 1 "$server_url"
  measure "memory-batch-$round" 100 "$server_url"
  stop_server
  for nodes in 1 2 3; do
    redis-cli -p "$redis_port" flushall >/dev/null
    urls=(); node_pids=()
    for n in $(seq "$nodes"); do start_ringcast "node$n" "$work/node.json"; urls+=("$server_url"); node_pids+=("$server_pid"); done
    measure "nodes$nodes-single-$round" 1 "${urls[@]}"
    measure "nodes$nodes-batch-$round" 100 "${urls[@]}"
    for pid in "${node_pids[@]}"; do stop_server "$pid"; done
  done
done
# The ceiling: the same Redis taking pipelined pushes (redis-benchmark's own measure) and pipelined
# XADDs of a 200-byte entry (what an append writes), 4 clients, 100 commands per round trip.
redis-cli -p "$redis_port" flushall >/dev/null
payload=$(head -c 200 /dev/zero | tr '\0' x)
"${pin_load[@]}" redis-benchmark -p "$redis_port" -q -c 4 -P 100 -n 1000000 -t lpush --csv >"$results/redis-lpush.csv"
"${pin_load[@]}" redis-benchmark -p "$redis_port" -q -c 4 -P 100 -n 500000 --csv XADD ringcast:bench '*' e "$payload" >"$results/redis-xadd.csv"

echo
echo "### Events a second through the cluster"
echo
echo "\`Benchmarks/cluster.sh$([ "$quick" = 1 ] && echo " --quick")\`: \`ringcast-costs throughput --connections 4\` (CPU 1) spread round-robin over"
echo "one to three nodes on \`redis://…\` (one service thread each; nodes and redis-server on CPU 0), against one node on memory"
echo "on CPU 0 alone. One update per \`POST /api/tasks/ID\` ($single requests) and batches of 100 to \`POST /api/events\`"
echo "($batched requests), to 1 000 tasks; $rounds round(s), medians. Redis commands per event from \`INFO commandstats\`"
echo "(a script's own calls included)."
echo
python3 - "$results" "$rounds" <<'PY'
import csv, json, statistics, sys
results, rounds = sys.argv[1], int(sys.argv[2])
def runs(name):
    return [json.load(open(f"{results}/{name}-{r}.json")) for r in range(1, rounds + 1)]
def rate(name):
    return statistics.median(run["rate"] for run in runs(name))
def calls(name):
    return statistics.median(run["redisCalls"] / run["events"] for run in runs(name))
def ceiling(name):
    with open(f"{results}/{name}.csv") as handle:
        return float(list(csv.reader(handle))[-1][1])
print("| | one update per request (events/s) | / memory | batches of 100 (events/s) | / memory | Redis commands per event (single, batched) |")
print("| --- | --- | --- | --- | --- | --- |")
memory = rate("memory-single"), rate("memory-batch")
print(f"| one node on memory | {memory[0]:.0f} | 1.00 | {memory[1]:.0f} | 1.00 | – |")
for nodes in (1, 2, 3):
    single, batch = rate(f"nodes{nodes}-single"), rate(f"nodes{nodes}-batch")
    print(f"| {nodes} node{'s' if nodes > 1 else ''} on Redis | {single:.0f} | {single / memory[0]:.2f} | {batch:.0f} | **{batch / memory[1]:.2f}** | "
          f"{calls(f'nodes{nodes}-single'):.2f}, {calls(f'nodes{nodes}-batch'):.3f} |")
print()
print(f"The same redis-server's ceiling (`redis-benchmark -c 4 -P 100`): {ceiling('redis-lpush'):.0f} LPUSH/s, "
      f"{ceiling('redis-xadd'):.0f} XADD/s of a 200-byte entry.")
PY
