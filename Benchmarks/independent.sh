#!/usr/bin/env bash
# The issue's scenarios through a load generator that shares no code with Ringcast or
# libwebsockets (Benchmarks/epoll-load: C, one epoll thread for the watchers, hand-written
# WebSocket framing, 120-byte progress updates over HTTP, each to its own task), against Ringcast
# with one and two service threads and the raw-libwebsockets reference, rounds alternating, the
# server pinned to CPU 0 and the generator to CPU 1. Prints a Markdown section on stdout
# (Benchmarks/run puts it in RESULTS.md); progress goes to stderr.
#
#   Benchmarks/independent.sh            # 2 rounds, 5 s of publishing a scenario (about 5 minutes)
#   Benchmarks/independent.sh --quick    # 1 round, shorter
#   Benchmarks/independent.sh --rounds 3
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
quick=0
rounds=2
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1; rounds=1 ;;
    --rounds) rounds="$2"; shift ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "independent.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
seconds=$([ "$quick" = 1 ] && echo 2 || echo 5)

swift build -c release --product ringcast >&2
make -s -C Benchmarks/reference >&2
make -s -C Benchmarks/epoll-load >&2
ringcast=.build/release/ringcast
refserver=Benchmarks/reference/refserver
generator=Benchmarks/epoll-load/epoll-load
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
results=Benchmarks/results/independent
rm -rf "$results"; mkdir -p "$results"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir -p "$work/public"; echo '<!doctype html><title>bench</title>' > "$work/public/index.html"
for threads in 1 2; do
  echo "{\"host\": \"127.0.0.1\", \"port\": 0, \"publicDir\": \"public\", \"logLevel\": \"warning\", \"maxPublishRate\": 0, \"threads\": $threads}" > "$work/config$threads.json"
done
pin_server=(); pin_load=()
if command -v taskset > /dev/null && [ "$(nproc)" -ge 2 ]; then pin_server=(taskset -c 0); pin_load=(taskset -c 1); fi

# name|what|generator arguments
watchers_many=$([ "$quick" = 1 ] && echo 2000 || echo 10000)
scenarios=(
  "slow|1 000 watchers, 20 msg/s|--watchers 1000 --rate 20 --messages $(( 20 * seconds ))"
  "medium|1 000 watchers, 100 msg/s|--watchers 1000 --rate 100 --messages $(( 100 * seconds ))"
  "serial|1 000 watchers, as fast as one POST at a time allows|--watchers 1000 --rate 0 --messages $(( 400 * seconds ))"
  "wide|5 000 watchers, 50 msg/s|--watchers 5000 --rate 50 --messages $(( 50 * seconds ))"
  "connect|$watchers_many watchers connecting: server CPU per connection|--watchers $watchers_many --hold 1"
)
for round in $(seq "$rounds"); do
  for entry in "${scenarios[@]}"; do
    IFS='|' read -r name what arguments <<< "$entry"
    for server in ringcast ringcast2 reference; do
      : > "$work/out"
      case $server in
        ringcast) "${pin_server[@]}" "$ringcast" serve --config "$work/config1.json" > "$work/out" 2>> "$results/$server.stderr" & ;;
        ringcast2) "${pin_server[@]}" "$ringcast" serve --config "$work/config2.json" > "$work/out" 2>> "$results/$server.stderr" & ;;
        reference) "${pin_server[@]}" "$refserver" --host 127.0.0.1 --port 0 > "$work/out" 2>> "$results/$server.stderr" & ;;
      esac
      pid=$!
      for _ in $(seq 100); do grep -q '^listening on' "$work/out" && break; sleep 0.05; done
      port=$(sed -n 's/^listening on http:\/\/127.0.0.1:\([0-9]*\)$/\1/p' "$work/out")
      [ -n "$port" ] || { echo "independent.sh: $server did not start" >&2; cat "$work/out" >&2; exit 1; }
      echo "round $round: $name, $server" >&2
      # shellcheck disable=SC2086
      "${pin_load[@]}" "$generator" --port "$port" --pid "$pid" $arguments > "$results/$name-$server-$round.json" 2> "$results/$name-$server-$round.log" \
        || echo "  $name $server: $(tail -1 "$results/$name-$server-$round.log")" >&2
      kill -TERM "$pid"; wait "$pid" 2> /dev/null || true
      sleep 0.5
    done
  done
done

python3 - "$results" "$rounds" "$quick" "${scenarios[@]}" <<'PY'
import glob, json, statistics, sys
results, rounds, quick, scenarios = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4:]
def median(name, server, key):
    values = []
    for path in glob.glob(f"{results}/{name}-{server}-*.json"):
        try:
            record = json.load(open(path))
        except ValueError:
            continue
        if key in record and (key == "connectCpuUsPerConnection" or record.get("delivered") == record.get("expected")):
            values.append(record[key])
    return statistics.median(values) if values else None
show = lambda v: "–" if v is None else f"{v:.2f}"
ratio = lambda a, b: "–" if a is None or not b else f"**{a / b:.2f}**"
print(f"`Benchmarks/independent.sh{' --quick' if quick else ''}`: Benchmarks/epoll-load (C, one epoll thread, no libwebsockets), "
      f"120-byte updates, each to its own task; median of {rounds} alternating round{'s' if rounds > 1 else ''}; "
      "a run that lost an update is left out.\n")
print("| scenario | reference | Ringcast, 1 thread | Ringcast, 2 threads | 1 thread / reference | 2 threads / reference | p99 ms: reference, 1 thread, 2 threads |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for entry in scenarios:
    name, what, _ = entry.split("|", 2)
    key = "connectCpuUsPerConnection" if name == "connect" else "cpuUsPerDelivery"
    unit = "µs per connection" if name == "connect" else "µs per delivery"
    ref, one, two = (median(name, s, key) for s in ("reference", "ringcast", "ringcast2"))
    p99 = "–" if name == "connect" else ", ".join(show(median(name, s, "latencyP99Ms")) for s in ("reference", "ringcast", "ringcast2"))
    print(f"| {what} ({unit}) | {show(ref)} | {show(one)} | {show(two)} | {ratio(one, ref)} | {ratio(two, ref)} | {p99} |")
PY
