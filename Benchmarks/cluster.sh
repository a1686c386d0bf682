#!/usr/bin/env bash
# Delivery latency across the nodes of a cluster against one node alone. Starts a redis-server of
# its own and release builds of Ringcast, all on 127.0.0.1, and prints Markdown (Benchmarks/run
# puts it in RESULTS.md). The servers and redis-server share CPU 0, the load generator has CPU 1.
# Per-run JSON and logs are kept in Benchmarks/results/cluster/.
#
#   Benchmarks/cluster.sh            # 1 000 watchers, 100 updates/s for 10 s, 3 rounds
#   Benchmarks/cluster.sh --quick    # 1 000 watchers, 100 updates/s for 3 s, 1 round
#   Benchmarks/cluster.sh --rounds 5
. "$(dirname "$0")/lib.sh"
options="quick rounds=N"
parse_options "$@"
[ ${#rest[@]} -eq 0 ] || usage_error "unexpected argument ${rest[0]}"
if [ "$quick" = 1 ]; then seconds=3; else seconds=10; fi
rounds=${rounds:-$([ "$quick" = 1 ] && echo 1 || echo 3)}

command -v redis-server >/dev/null || fail "redis-server is missing (scripts/deps.sh test installs it)"
build_release ringcast
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
