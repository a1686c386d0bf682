#!/usr/bin/env bash
# What a watcher costs the server over Server-Sent Events (GET /api/stream) against over the
# WebSocket, through the generator that shares no code with Ringcast (Benchmarks/epoll-load,
# --sse), on the fan-out rows of Benchmarks/independent.sh; and Nchan's eventsource subscriber
# and WebSocket subscriber on the same rows when Debian's libnginx-mod-nchan is installed. Ringcast
# runs with one service thread, pinned as lib.sh pins it; rounds alternate. Prints a Markdown
# section on stdout; progress goes to stderr.
#
#   Benchmarks/sse.sh            # 2 rounds, 5 s of publishing a row
#   Benchmarks/sse.sh --quick    # 1 round, 2 s
. "$(dirname "$0")/lib.sh"
options="quick rounds=N"
parse_options "$@"
[ ${#rest[@]} -eq 0 ] || usage_error "unexpected argument ${rest[0]}"
rounds=${rounds:-$([ "$quick" = 1 ] && echo 1 || echo 2)}
seconds=$([ "$quick" = 1 ] && echo 2 || echo 5)

build_release ringcast
build_epoll_load
fresh_results sse
ringcast_config "$work/ringcast.json" threads=1

# name|what|generator arguments
scenarios=(
  "medium|1 000 watchers, 100 msg/s|--watchers 1000 --rate 100 --messages $(( 100 * seconds ))"
  "serial|1 000 watchers, as fast as one POST at a time allows|--watchers 1000 --rate 0 --messages $(( 400 * seconds ))"
  "wide|5 000 watchers, 50 msg/s|--watchers 5000 --rate 50 --messages $(( 50 * seconds ))"
)
# server|transport|generator arguments of the transport
runs=("ringcast|ws|" "ringcast|sse|--sse /api/stream?watch=*")
if have_nchan; then
  runs+=("nchan|ws|" "nchan|sse|--sse /sse")
else
  echo "$script: no Nchan (apt-get install libnginx-mod-nchan adds it)" >&2
fi
for round in $(seq "$rounds"); do
  for entry in "${scenarios[@]}"; do
    IFS='|' read -r name _ arguments <<< "$entry"
    for run in "${runs[@]}"; do
      IFS='|' read -r server transport extra <<< "$run"
      start_by_name "$server"
      echo "round $round: $name, $server over $transport" >&2
      # shellcheck disable=SC2086
      "${pin_load[@]}" "$epoll_load" --port "$server_port" --pid "$server_pid" $arguments $extra > "$results/$name-$server-$transport-$round.json" \
        2> "$results/$name-$server-$transport-$round.log" || echo "  $name $server $transport: $(tail -1 "$results/$name-$server-$transport-$round.log")" >&2
      stop_server
      sleep 0.5
    done
  done
done

python3 - "$results" "$rounds" "$quick" "${scenarios[@]}" <<'PY'
import glob, json, statistics, sys
results, rounds, quick, scenarios = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4:]
def median(name, run, key):
    values = []
    for path in glob.glob(f"{results}/{name}-{run}-*.json"):
        try:
            record = json.load(open(path))
        except ValueError:
            continue
        if key in record and record.get("delivered") == record.get("expected"):
            values.append(record[key])
    return statistics.median(values) if values else None
show = lambda v: "–" if v is None else f"{v:.2f}"
ratio = lambda a, b: "–" if a is None or not b else f"**{a / b:.2f}**"
has_nchan = bool(glob.glob(f"{results}/*-nchan-*.json"))
print(f"`Benchmarks/sse.sh{' --quick' if quick else ''}`: Benchmarks/epoll-load (C, no libwebsockets) as WebSocket watchers and as "
      f"Server-Sent Events watchers (`--sse`), 120-byte updates over HTTP, each to its own task; Ringcast with one service thread; "
      f"median of {rounds} alternating round{'s' if rounds > 1 else ''}; a run that lost an update is left out."
      + (" Nchan: nginx with Debian's libnginx-mod-nchan, one worker, one channel, `nchan_subscriber websocket` and `eventsource` "
         "(Benchmarks/nchan/nginx.conf.in)." if has_nchan else "") + "\n")
columns = ["ringcast-ws", "ringcast-sse"] + (["nchan-ws", "nchan-sse"] if has_nchan else [])
names = {"ringcast-ws": "Ringcast WS", "ringcast-sse": "Ringcast SSE", "nchan-ws": "Nchan WS", "nchan-sse": "Nchan EventSource"}
header = ["server CPU, µs per delivery"] + [names[c] for c in columns] + ["Ringcast SSE / WS"] + (["Ringcast SSE / Nchan EventSource"] if has_nchan else []) \
    + ["p99 ms: " + ", ".join(names[c] for c in columns)]
print("| " + " | ".join(header) + " |")
print("|" + " --- |" * len(header))
for entry in scenarios:
    name, what, _ = entry.split("|", 2)
    values = {c: median(name, c, "cpuUsPerDelivery") for c in columns}
    cells = [what] + [show(values[c]) for c in columns] + [ratio(values["ringcast-sse"], values["ringcast-ws"])]
    if has_nchan: cells.append(ratio(values["ringcast-sse"], values["nchan-sse"]))
    cells.append(", ".join(show(median(name, c, "latencyP99Ms")) for c in columns))
    print("| " + " | ".join(cells) + " |")
PY
