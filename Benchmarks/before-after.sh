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
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
old=${1:?usage: Benchmarks/before-after.sh OLD_RINGCAST [ROUNDS]}
rounds=${2:-3}
[ -x "$old" ] || { echo "before-after.sh: $old is not an executable ringcast binary; build the older commit first (see --help)" >&2; exit 2; }
swift build -c release --product ringcast >&2
new=.build/release/ringcast
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
results=Benchmarks/results/before-after
rm -rf "$results"; mkdir -p "$results"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir -p "$work/public"; echo '<!doctype html><title>bench</title>' > "$work/public/index.html"
echo '{"host": "127.0.0.1", "port": 0, "publicDir": "public", "logLevel": "warning"}' > "$work/old.json"
echo '{"host": "127.0.0.1", "port": 0, "publicDir": "public", "logLevel": "warning", "threads": 1, "maxPublishRate": 0}' > "$work/new.json"
pin_server=(); pin_load=()
if command -v taskset > /dev/null && [ "$(nproc)" -ge 2 ]; then pin_server=(taskset -c 0); pin_load=(taskset -c 1); fi

scenarios=(
  "light|--clients 1000 --rate 20 --duration 3 --publish http --tasks 1000"
  "fanout|--clients 1000 --rate 100 --duration 3 --publish ws --tasks 1000"
  "idle|--clients 2000 --messages 0 --duration 2"
)
for round in $(seq "$rounds"); do
  for entry in "${scenarios[@]}"; do
    IFS='|' read -r name arguments <<< "$entry"
    for build in old new; do
      binary=$([ $build = old ] && echo "$old" || echo "$new")
      : > "$work/out"
      "${pin_server[@]}" "$binary" serve --config "$work/$build.json" > "$work/out" 2>> "$results/$build.stderr" &
      pid=$!
      for _ in $(seq 100); do grep -q '^listening on' "$work/out" && break; sleep 0.05; done
      port=$(sed -n 's/^listening on http:\/\/127.0.0.1:\([0-9]*\)$/\1/p' "$work/out")
      [ -n "$port" ] || { echo "before-after.sh: the $build server did not start" >&2; cat "$work/out" >&2; exit 1; }
      echo "round $round: $name, $build" >&2
      # shellcheck disable=SC2086
      "${pin_load[@]}" "$new" load --url "http://127.0.0.1:$port" --server-pid "$pid" $arguments --json \
        > "$results/$name-$build-$round.json" 2> "$results/$name-$build-$round.log" || echo "  failed: $(tail -1 "$results/$name-$build-$round.log")" >&2
      kill -TERM "$pid"; wait "$pid" 2> /dev/null || true
      sleep 0.5
    done
  done
done

python3 - "$results" "$rounds" "$old" <<'PY'
import glob, json, statistics, sys
results, rounds, old = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def runs(name, build):
    out = []
    for path in sorted(glob.glob(f"{results}/{name}-{build}-*.json")):
        try: out.append(json.load(open(path)))
        except ValueError: pass
    return out
figures = [
    ("light: server CPU per delivery (µs)", "light", lambda r: r["server"]["cpuMsPer1000Deliveries"]),
    ("fanout: server CPU per delivery (µs)", "fanout", lambda r: r["server"]["cpuMsPer1000Deliveries"]),
    ("idle: server CPU per connection (µs)", "idle", lambda r: r["server"]["connectCpuSeconds"] / r["connected"] * 1e6),
    ("idle: memory per connection (KiB)", "idle", lambda r: r["server"]["rssPerWatcherKiB"]),
]
print(f"`Benchmarks/before-after.sh {old} {rounds}`: median of {rounds} alternating rounds, one service thread each.\n")
print("| figure | before | after | after / before |")
print("| --- | --- | --- | --- |")
for label, name, value in figures:
    cells = []
    for build in ("old", "new"):
        values = [value(r) for r in runs(name, build)]
        cells.append(statistics.median(values) if values else None)
    ratio = f"{cells[1] / cells[0]:.2f}" if None not in cells and cells[0] else "–"
    show = lambda v: "–" if v is None else f"{v:.2f}"
    print(f"| {label} | {show(cells[0])} | {show(cells[1])} | {ratio} |")
PY
