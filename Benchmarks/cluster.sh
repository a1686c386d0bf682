#!/bin/sh
# Delivery latency across the nodes of a cluster against one node alone. Starts a redis-server of
# its own and release builds of Ringcast, all on 127.0.0.1, and prints Markdown (Benchmarks/run
# puts it in RESULTS.md). The servers and redis-server share CPU 0, the load generator has CPU 1.
#
#   Benchmarks/cluster.sh            # 1 000 watchers, 100 updates/s for 10 s, 3 rounds
#   Benchmarks/cluster.sh --quick    # 1 000 watchers, 100 updates/s for 3 s, 1 round
set -eu
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
quick=0
[ "${1:-}" = --quick ] && quick=1
if [ "$quick" = 1 ]; then seconds=3; rounds=1; else seconds=10; rounds=3; fi

command -v redis-server >/dev/null || { echo "cluster.sh: redis-server is missing (scripts/deps.sh test installs it)" >&2; exit 1; }
swift build -c release --product ringcast >&2
bin=$(swift build -c release --show-bin-path)
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
if [ "$(nproc)" -ge 2 ]; then pin_server="taskset -c 0"; pin_load="taskset -c 1"; else pin_server=""; pin_load=""; fi

. Benchmarks/scratch.sh

# Starts `ringcast serve` with config $2 as NAME $1; leaves its URL in $url and its pid in $pid.
start() {
    $pin_server "$bin/ringcast" serve --config "$2" >"$work/$1.out" 2>"$work/$1.err" &
    pid=$!
    pids="$pids $pid"
    for _ in $(seq 200); do
        url=$(sed -n 's/^listening on //p' "$work/$1.out" 2>/dev/null | head -n 1)
        [ -n "$url" ] && return
        sleep 0.05
    done
    echo "cluster.sh: $1 did not start: $(cat "$work/$1.err")" >&2
    exit 1
}

stop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

# A port nobody listens on, for redis-server (it cannot be told to pick one).
redis_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
$pin_server redis-server --bind 127.0.0.1 --port "$redis_port" --save "" --appendonly no --dir "$work" \
    >"$work/redis.out" 2>&1 &
redis_pid=$!
pids="$pids $redis_pid"
for _ in $(seq 100); do redis-cli -p "$redis_port" ping 2>/dev/null | grep -q PONG && break; sleep 0.05; done

mkdir -p "$work/public"
common='"host":"127.0.0.1","port":0,"publicDir":"public","logLevel":"error","maxPublishRate":0,"threads":1'
printf '{%s,"storage":"state.db"}\n' "$common" >"$work/alone.json"
printf '{%s,"storage":"redis://127.0.0.1:%s"}\n' "$common" "$redis_port" >"$work/node.json"

load="--clients 1000 --rate 100 --duration $seconds --tasks 1000 --publish http --json --quiet"
# run NAME WATCH_URL PUBLISH_URL: one `ringcast load` run, its JSON in $work/NAME.json.
run() {
    # shellcheck disable=SC2086
    $pin_load "$bin/ringcast" load --url "$2" --publish-to "$3" $load >"$work/$1.json" 2>"$work/$1.log" \
        || { echo "cluster.sh: $1 failed: $(tail -1 "$work/$1.log")" >&2; exit 1; }
}

for round in $(seq "$rounds"); do
    start alone "$work/alone.json"; alone_url=$url; alone_pid=$pid
    run "alone-$round" "$alone_url" "$alone_url"
    stop "$alone_pid"
    redis-cli -p "$redis_port" flushall >/dev/null
    start a "$work/node.json"; a_url=$url; a_pid=$pid
    start b "$work/node.json"; b_url=$url; b_pid=$pid
    start c "$work/node.json"; c_pid=$pid
    run "same-$round" "$b_url" "$b_url"
    run "across-$round" "$b_url" "$a_url"
    stop "$a_pid"; stop "$b_pid"; stop "$c_pid"
done

echo "### Delivery across the nodes of a cluster"
echo
echo "\`Benchmarks/cluster.sh$([ "$quick" = 1 ] && echo " --quick")\`: one redis-server 7 of its own and three \`ringcast serve\` nodes"
echo "on \`\"storage\": \"redis://…\"\` (one service thread each), all on CPU 0, against one node alone on SQLite;"
echo "\`ringcast load $load\` on CPU 1, watchers on node B. $rounds round(s); medians."
echo
python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def figures(name):
    runs = [json.load(open(f"{work}/{name}-{r}.json")) for r in range(1, rounds + 1)]
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
