#!/usr/bin/env bash
# Benchmarks/run's scenarios through a load generator that shares no code with Ringcast or
# libwebsockets (Benchmarks/epoll-load: C, one epoll thread for the watchers, hand-written
# WebSocket framing, 120-byte progress updates over HTTP, each to its own task), against Ringcast
# with one and two service threads and the raw-libwebsockets reference, rounds alternating, the
# server pinned to CPU 0 and the generator to CPU 1; and against Nchan (nginx with Debian's
# libnginx-mod-nchan: apt-get install libnginx-mod-nchan) when it is installed, with one nginx
# worker (Benchmarks/nchan/nginx.conf.in). Prints a Markdown section on stdout
# (Benchmarks/run puts it in RESULTS.md); progress goes to stderr.
#
#   Benchmarks/independent.sh            # 2 rounds, 5 s of publishing a scenario (about 5 minutes)
#   Benchmarks/independent.sh --quick    # 1 round, shorter
#   Benchmarks/independent.sh --rounds 3
. "$(dirname "$0")/lib.sh"
options="quick rounds=N"
parse_options "$@"
[ ${#rest[@]} -eq 0 ] || usage_error "unexpected argument ${rest[0]}"
rounds=${rounds:-$([ "$quick" = 1 ] && echo 1 || echo 2)}
seconds=$([ "$quick" = 1 ] && echo 2 || echo 5)

build_release ringcast
build_reference
build_epoll_load
fresh_results independent
ringcast_config "$work/ringcast.json" threads=1
ringcast_config "$work/ringcast2.json" threads=2

# name|what|generator arguments
watchers_many=$([ "$quick" = 1 ] && echo 2000 || echo 10000)
scenarios=(
  "slow|1 000 watchers, 20 msg/s|--watchers 1000 --rate 20 --messages $(( 20 * seconds ))"
  "medium|1 000 watchers, 100 msg/s|--watchers 1000 --rate 100 --messages $(( 100 * seconds ))"
  "serial|1 000 watchers, as fast as one POST at a time allows|--watchers 1000 --rate 0 --messages $(( 400 * seconds ))"
  "wide|5 000 watchers, 50 msg/s|--watchers 5000 --rate 50 --messages $(( 50 * seconds ))"
  "connect|$watchers_many watchers connecting: server CPU per connection|--watchers $watchers_many --hold 1"
)
servers=(ringcast ringcast2 reference)
if have_nchan; then servers+=(nchan); else echo "$script: no Nchan (apt-get install libnginx-mod-nchan adds it)" >&2; fi
for round in $(seq "$rounds"); do
  for entry in "${scenarios[@]}"; do
    IFS='|' read -r name _ arguments <<< "$entry"
    for server in "${servers[@]}"; do
      start_by_name "$server"
      echo "round $round: $name, $server" >&2
      # shellcheck disable=SC2086
      "${pin_load[@]}" "$epoll_load" --port "$server_port" --pid "$server_pid" $arguments > "$results/$name-$server-$round.json" 2> "$results/$name-$server-$round.log" \
        || echo "  $name $server: $(tail -1 "$results/$name-$server-$round.log")" >&2
      stop_server
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
has_nchan = bool(glob.glob(f"{results}/*-nchan-*.json"))
print(f"`Benchmarks/independent.sh{' --quick' if quick else ''}`: Benchmarks/epoll-load (C, one epoll thread, no libwebsockets), "
      f"120-byte updates over HTTP, each to its own task; median of {rounds} alternating round{'s' if rounds > 1 else ''}; "
      "a run that lost an update is left out." + (" Nchan: nginx 1.22 with Debian's libnginx-mod-nchan 1.3.6, one worker, one channel (Benchmarks/nchan/nginx.conf.in)." if has_nchan else "") + "\n")
columns = ["reference", "ringcast", "ringcast2"] + (["nchan"] if has_nchan else [])
names = {"reference": "reference", "ringcast": "Ringcast, 1 thread", "ringcast2": "Ringcast, 2 threads", "nchan": "Nchan"}
header = ["scenario"] + [names[c] for c in columns] + ["1 thread / reference", "2 threads / reference"] + (["1 thread / Nchan"] if has_nchan else []) + ["p99 ms: " + ", ".join(names[c] for c in columns)]
print("| " + " | ".join(header) + " |")
print("|" + " --- |" * len(header))
for entry in scenarios:
    name, what, _ = entry.split("|", 2)
    key = "connectCpuUsPerConnection" if name == "connect" else "cpuUsPerDelivery"
    unit = "µs per connection" if name == "connect" else "µs per delivery"
    values = {c: median(name, c, key) for c in columns}
    cells = [f"{what} ({unit})"] + [show(values[c]) for c in columns]
    cells += [ratio(values["ringcast"], values["reference"]), ratio(values["ringcast2"], values["reference"])]
    if has_nchan: cells.append(ratio(values["ringcast"], values["nchan"]))
    cells.append("–" if name == "connect" else ", ".join(show(median(name, c, "latencyP99Ms")) for c in columns))
    print("| " + " | ".join(cells) + " |")
PY
