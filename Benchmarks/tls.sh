#!/usr/bin/env bash
# What TLS costs: the same load over wss:// against plain ws://, side by side in one run. 500
# watchers and an HTTP(S) publisher at 200 updates/s over 10 tasks, against `ringcast serve` with
# `tls` (a certificate from a CA made here with openssl, which `ringcast load --cacert` trusts) and
# without. Rounds alternate, the server pinned to CPU 0 and `ringcast load` to CPU 1. Prints a
# Markdown section on stdout (Benchmarks/run puts it in RESULTS.md); progress goes to stderr.
#
#   Benchmarks/tls.sh              # 3 rounds of 10 s runs (about 2 minutes)
#   Benchmarks/tls.sh --quick      # 1 round of 3 s runs
# Per-run JSON and logs are kept in Benchmarks/results/tls/.
. "$(dirname "$0")/lib.sh"
options="quick rounds=N"
parse_options "$@"
[ ${#rest[@]} -eq 0 ] || usage_error "unexpected argument ${rest[0]}"
rounds=${rounds:-$([ "$quick" = 1 ] && echo 1 || echo 3)}
duration=$([ "$quick" = 1 ] && echo 3 || echo 10)
load_arguments="--clients 500 --rate 200 --tasks 10 --duration $duration --publish http"

build_release ringcast
fresh_results tls
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/ca.key" -out "$work/ca.pem" -days 2 -subj "/CN=Ringcast bench CA" \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout "$work/server.key" -out "$work/server.csr" -subj /CN=localhost 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$work/server.ext"
openssl x509 -req -in "$work/server.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial -days 2 \
  -extfile "$work/server.ext" -out "$work/server.pem" 2>/dev/null
ringcast_config "$work/plain.json"
ringcast_config "$work/tls.json" tls="{\"cert\": \"$work/server.pem\", \"key\": \"$work/server.key\"}"

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for round in $(seq "$rounds"); do
  for name in plain tls; do
    start_by_name "$name"
    echo "tls round $round: $name (pid $server_pid, $server_url)" >&2
    # shellcheck disable=SC2086
    run_load "$name-$round" --server "$server_url" --cacert "$work/ca.pem" --server-pid "$server_pid" $load_arguments --quiet || true
    stop_server
    sleep 0.5
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$results" "$rounds" "$quick" "$load_arguments" "$load_before" "$load_after" <<'PY'
import glob, json, os, statistics, sys
sys.path.insert(0, "Benchmarks")
from summarize import dig, cell as summary_cell  # formatted as Benchmarks/run's tables are

results, rounds, quick, arguments, load_before, load_after = sys.argv[1:]
rounds = int(rounds)
runs = {}
for path in glob.glob(os.path.join(results, "*.json")):
    try:
        with open(path) as handle:
            runs.setdefault(os.path.basename(path).rsplit("-", 1)[0], []).append(json.load(handle))
    except json.JSONDecodeError:
        pass

FIGURES = [
    ("server CPU per 1 000 deliveries (ms)", lambda r: dig(r, "server/cpuMsPer1000Deliveries"), 2),
    ("server CPU per published update (µs)", lambda r: dig(r, "server/cpuUsPerPublished"), 1),
    ("latency p50 (ms)", lambda r: dig(r, "latencyMs/p50"), 1),
    ("latency p99 (ms)", lambda r: dig(r, "latencyMs/p99"), 1),
    ("updates delivered (all watchers)", lambda r: r.get("delivered"), 0),
    ("watchers connected", lambda r: r.get("connected"), 0),
]

def stats(server, figure):
    values = [v for v in (figure(r) for r in runs.get(server, [])) if isinstance(v, (int, float))]
    return (statistics.median(values), min(values), max(values), len(values)) if values else None

SERVERS = [("plain", "ws:// and http://"), ("tls", "wss:// and https://")]
out = [f"### TLS: 500 watchers, 200 updates/s over 10 tasks, over wss against ws", ""]
out.append(f"`Benchmarks/tls.sh{' --quick' if quick == '1' else ''}`: {rounds} round{'s' if rounds != 1 else ''} alternating, "
           f"each server started fresh (`tls` with a 2048-bit RSA certificate from a CA made by the script), the server on "
           f"CPU 0 and the load generator on CPU 1; every run is `ringcast load --server http(s)://127.0.0.1:PORT --cacert CA "
           f"--server-pid PID {arguments} --json`. Load average (1, 5, 15 min): {load_before} before, {load_after} after. "
           f"Cells: median (min–max). Server CPU is summed over the server's threads from the start of publishing to the end "
           f"of the drain, so the handshakes of the watchers' connects are not in it.")
out.append("")
out.append("| figure | " + " | ".join(name for _, name in SERVERS) + " |")
out.append("| --- |" + " --- |" * len(SERVERS))
for label, figure, decimals in FIGURES:
    out.append(f"| {label} | " + " | ".join(summary_cell(stats(server, figure), decimals, rounds) for server, _ in SERVERS) + " |")
out.append("")
missing = [name for server, name in SERVERS if len(runs.get(server, [])) < rounds]
if missing:
    out.append(f"Runs that failed or were missing: {', '.join(missing)} (see Benchmarks/results/tls/*.log).")
    out.append("")
print("\n".join(out))
PY
