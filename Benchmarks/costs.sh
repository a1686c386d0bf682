#!/bin/sh
# What one published event costs where that cost must not grow, and SQLite against memory. Starts
# release builds of Ringcast on 127.0.0.1 and prints Markdown (Benchmarks/run puts it in RESULTS.md).
#
#   Benchmarks/costs.sh              # 10 000 watchers, 20 000 events; 100 000 updates; 2 000 batches
#   Benchmarks/costs.sh --quick      # 2 000 watchers, 5 000 events; 20 000 updates; 500 batches
set -eu
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
quick=0
[ "${1:-}" = --quick ] && quick=1

swift build -c release --product ringcast >&2
swift build -c release --product ringcast-costs >&2
bin=$(swift build -c release --show-bin-path)
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

. Benchmarks/scratch.sh

# Starts `ringcast serve` with config $2 as NAME $1; leaves its URL in $url and its pid in $pid.
start() {
    "$bin/ringcast" serve --config "$2" >"$work/$1.out" 2>"$work/$1.err" &
    pid=$!
    pids="$pids $pid"
    for _ in $(seq 100); do
        url=$(sed -n 's/^listening on //p' "$work/$1.out" 2>/dev/null | head -n 1)
        [ -n "$url" ] && return
        sleep 0.05
    done
    echo "costs.sh: $1 did not start: $(cat "$work/$1.err")" >&2
    exit 1
}

mkdir -p "$work/public"
# Benchmarks publish faster than a publisher may by default (maxPublishRate), and open more
# sockets from one address than maxConnectionsPerAddress allows (loopback is exempt anyway).
common='"host":"127.0.0.1","port":0,"publicDir":"public","logLevel":"error","maxPublishRate":0,"maxTasks":100000'
printf '{%s}\n' "$common" >"$work/memory.json"
printf '{%s,"storage":"state.db"}\n' "$common" >"$work/sqlite.json"

if [ "$quick" = 1 ]; then watchers=2000; events=5000; updates=20000; batches=500; else watchers=10000; events=20000; updates=100000; batches=2000; fi

echo "### Pattern sets: each watcher on its own task against one shared set"
echo
echo "\`ringcast-costs patterns --watchers $watchers --events $events\` against one \`ringcast serve\` (memory)."
echo
start patterns "$work/memory.json"
"$bin/ringcast-costs" patterns --server "$url" --pid "$pid" --watchers "$watchers" --events "$events"
echo
echo "### A task's age: the last updates against the first"
echo
echo "\`ringcast-costs age --updates $updates\`: one task, one HTTP request per update, keep-alive."
echo
start age "$work/memory.json"
"$bin/ringcast-costs" age --server "$url" --pid "$pid" --updates "$updates"
echo
echo "### Storage: SQLite against memory, batch publishing"
echo
echo "\`ringcast-costs storage --batches $batches --batch-size 100\`, one connection each, one after the other."
echo
start memory "$work/memory.json"
memory_url=$url
start sqlite "$work/sqlite.json"
"$bin/ringcast-costs" storage --target "memory=$memory_url" --target "sqlite=$url" --batches "$batches" --batch-size 100
