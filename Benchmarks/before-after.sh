#!/usr/bin/env bash
# Two builds of Ringcast side by side: an older `ringcast` binary against this tree's, through the
# same `ringcast load` runs (this tree's), rounds alternating, one service thread each (what a
# change must not make slower). Prints a Markdown table on stdout; progress goes to stderr.
#
#   Benchmarks/before-after.sh OLD_RINGCAST [ROUNDS]
#
# e.g. git worktree add /tmp/before a65da1b && (cd /tmp/before && swift build -c release --product ringcast)
#      Benchmarks/before-after.sh /tmp/before/.build/release/ringcast 3
# The older binary gets a config with only the keys every version knows; per-run JSON goes to
# Benchmarks/results/before-after/.
. "$(dirname "$0")/lib.sh"
parse_options "$@"
set -- "${rest[@]}"
if [ $# -lt 1 ] || [ $# -gt 2 ]; then usage_error "give the older ringcast binary, and the rounds if not 3"; fi
old=$1
rounds=${2:-3}
[ -x "$old" ] || usage_error "$old is not an executable ringcast binary; build the older commit first"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || usage_error "ROUNDS is a whole number of rounds, not '$rounds'"
build_release ringcast
fresh_results before-after
# The older binary gets only the keys every version knows, `threads` among them: without it, it
# would run one service thread per core and not be measured as this tree's is.
echo '{"host": "127.0.0.1", "port": 0, "publicDir": "public", "logLevel": "warning", "limitLoopback": false, "threads": 1}' >"$work/old.json"
ringcast_config "$work/new.json" threads=1

scenarios=(
  "light|--clients 1000 --rate 20 --duration 3 --publish http --tasks 1000"
  "fanout|--clients 1000 --rate 100 --duration 3 --publish ws --tasks 1000"
  "idle|--clients 2000 --messages 0 --duration 2"
)
for round in $(seq "$rounds"); do
  for entry in "${scenarios[@]}"; do
    IFS='|' read -r name arguments <<< "$entry"
    for build in old new; do
      start_ringcast "$build" "$work/$build.json" "$([ $build = old ] && echo "$old" || echo "$ringcast")"
      echo "round $round: $name, $build" >&2
      # shellcheck disable=SC2086
      run_load "$name-$build-$round" --url "$server_url" --server-pid "$server_pid" $arguments || true
      stop_server
      sleep 0.5
    done
  done
done

python3 - "$results" "$rounds" "$old" <<'PY'
import statistics, sys
sys.path.insert(0, "Benchmarks")
from runs import paired_ratio, runs  # noqa: E402 (the folder is on the path only now)
results, rounds, old = sys.argv[1], int(sys.argv[2]), sys.argv[3]
figures = [
    ("light: server CPU per delivery (µs)", "light", lambda r: r["server"]["cpuMsPer1000Deliveries"]),
    ("fanout: server CPU per delivery (µs)", "fanout", lambda r: r["server"]["cpuMsPer1000Deliveries"]),
    ("idle: server CPU per connection (µs)", "idle", lambda r: r["server"]["connectCpuSeconds"] / r["connected"] * 1e6),
    ("idle: memory per connection (KiB)", "idle", lambda r: r["server"]["rssPerWatcherKiB"]),
]
print(f"`Benchmarks/before-after.sh {old} {rounds}`: medians of {rounds} alternating rounds, one service thread each; "
      "the ratio is the median of the rounds' own ratios.\n")
print("| figure | before | after | after / before | rounds' ratios |")
print("| --- | --- | --- | --- | --- |")
show = lambda v: "–" if v is None else f"{v:.2f}"
for label, name, value in figures:
    cells = [statistics.median(map(value, found)) if (found := runs(results, f"{name}-{build}")) else None for build in ("old", "new")]
    pair = paired_ratio(results, f"{name}-new", f"{name}-old", value)
    ratio, spread = ("–", "–") if pair is None else (f"{pair[0]:.2f}", f"{pair[1]:.2f}–{pair[2]:.2f}")
    print(f"| {label} | {show(cells[0])} | {show(cells[1])} | {ratio} | {spread} |")
PY
