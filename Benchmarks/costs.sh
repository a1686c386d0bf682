#!/usr/bin/env bash
# What one published event costs where that cost must not grow, and SQLite against memory. Starts
# release builds of Ringcast on 127.0.0.1 and prints Markdown (Benchmarks/run puts it in RESULTS.md).
#
#   Benchmarks/costs.sh              # 10 000 watchers, 20 000 events; 100 000 updates; 2 000 batches
#   Benchmarks/costs.sh --quick      # 2 000 watchers, 5 000 events; 20 000 updates; 500 batches
. "$(dirname "$0")/lib.sh"
options="quick"
parse_options "$@"
[ ${#rest[@]} -eq 0 ] || usage_error "unexpected argument ${rest[0]}"
# Nothing is pinned, as these figures have always been taken.
pin_server=()
pin_load=()

build_release ringcast ringcast-costs

# Room above the default maxTasks (10 000): the pattern runs update as many tasks as there are watchers.
ringcast_config "$work/memory.json" logLevel=error maxTasks=100000
ringcast_config "$work/sqlite.json" logLevel=error maxTasks=100000 storage=state.db

# shellcheck disable=SC2154 # parse_options sets quick (printf -v)
if [ "$quick" = 1 ]; then watchers=2000; events=5000; updates=20000; batches=500; else watchers=10000; events=20000; updates=100000; batches=2000; fi

echo "### Pattern sets: each watcher on its own task against one shared set"
echo
echo "\`ringcast-costs patterns --watchers $watchers --events $events\` against one \`ringcast serve\` (memory)."
echo
start_ringcast patterns "$work/memory.json"
"$bin/ringcast-costs" patterns --server "$server_url" --pid "$server_pid" --watchers "$watchers" --events "$events"
stop_server
echo
echo "### A task's age: the last updates against the first"
echo
echo "\`ringcast-costs age --updates $updates\`: one task, one HTTP request per update, keep-alive."
echo
start_ringcast age "$work/memory.json"
"$bin/ringcast-costs" age --server "$server_url" --pid "$server_pid" --updates "$updates"
stop_server
echo
echo "### Storage: SQLite against memory, batch publishing"
echo
echo "\`ringcast-costs storage --batches $batches --batch-size 100\`, one connection each, one after the other."
echo
start_ringcast memory "$work/memory.json"
memory_url=$server_url
start_ringcast sqlite "$work/sqlite.json"
"$bin/ringcast-costs" storage --target "memory=$memory_url" --target "sqlite=$server_url" --batches "$batches" --batch-size 100
