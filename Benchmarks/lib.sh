# What every benchmark script shares, sourced first thing: `. "$(dirname "$0")/lib.sh"` (bash).
# It leaves the script in the repository's root with errors fatal, Swift on the PATH, as many file
# descriptors as the hard limit allows (each watcher is one in both processes), the server and the
# load generator pinned apart, and a scratch folder $work that goes, with every server started here,
# when the script ends however it ends. Then: one option loop (parse_options), the release builds
# (build_release, build_reference, build_epoll_load), one way to start a server and learn its port
# (start_ringcast, start_reference, start_nchan, start_by_name, start_server), stop_server, and
# run_load.
# shellcheck shell=bash disable=SC2034 # what it sets is for the scripts that source it
set -euo pipefail
script=Benchmarks/$(basename "$0")
script_file=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="/opt/swift/usr/bin:$PATH"
# Package.swift declares the benchmark executables (ringcast-bench, ringcast-costs) only when this
# is set, so that a plain `swift build` builds the product alone.
export RINGCAST_BENCHMARKS=1

ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
fd_limit=$(ulimit -n)

# The server on CPU 0 and the load generator on CPU 1, where there are two and taskset.
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  pin_server=(taskset -c 0)
  pin_load=(taskset -c 1)
  pinning="server on CPU 0, load generator on CPU 1 (taskset)"
else
  pin_server=()
  pin_load=()
  pinning="none (one core, or no taskset)"
fi

work=$(mktemp -d)
# KEEP_WORK=1 keeps the scratch folder (its path goes to stderr), for a look at what a run left.
keep_work=${KEEP_WORK:-}
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do stop_server "$pid"; done
  if [ -n "$keep_work" ]; then echo "$script: scratch folder kept: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail() { # MESSAGE: what went wrong, on stderr, and the script ends
  echo "$script: $*" >&2
  exit 1
}

# parse_options "$@": the one option loop. The script names its options in $options first:
#   options="quick rounds=N only= window=N"
# A bare name is a flag (--quick sets quick=1, else it is 0); NAME= takes a value (--only a,b or
# --only=a,b sets only, else it is empty); NAME=N takes a whole number. Dashes in a name become
# underscores in its variable. -h/--help prints the script's header comment. Words that are not
# options are left, in order, in the array $rest; so are options the script does not name
# when it sets pass_options=1 (it hands them on to another program); else such an option is an
# error that names it.
parse_options() {
  local spec name value found
  rest=()
  for spec in ${options:-}; do
    name=${spec%%=*}
    name=${name//-/_}
    if [ "$spec" = "${spec%%=*}" ]; then printf -v "$name" 0; else printf -v "$name" ''; fi
  done
  while [ $# -gt 0 ]; do
    case "$1" in
      -h | --help) show_help; exit 0 ;;
      --) shift; rest+=("$@"); break ;;
      --*) ;;
      *) rest+=("$1"); shift; continue ;;
    esac
    found=""
    for spec in ${options:-}; do
      if [ "--${spec%%=*}" = "${1%%=*}" ]; then found=$spec; break; fi
    done
    if [ -z "$found" ]; then
      [ "${pass_options:-0}" = 1 ] || usage_error "unknown option $1"
      rest+=("$1"); shift; continue
    fi
    name=${found%%=*}
    name=${name//-/_}
    if [ "$found" = "${found%%=*}" ]; then
      [ "$1" = "${1%%=*}" ] || usage_error "${1%%=*} takes no value"
      printf -v "$name" 1
      shift; continue
    fi
    if [ "$1" != "${1%%=*}" ]; then value=${1#*=}; shift
    else
      [ $# -ge 2 ] || usage_error "$1 needs a value"
      value=$2; shift 2
    fi
    if [ "${found#*=}" = N ] && ! [[ "$value" =~ ^[0-9]+$ ]]; then
      usage_error "--${found%%=*} takes a whole number, not '$value'"
    fi
    printf -v "$name" '%s' "$value"
  done
}

show_help() { # the script's header comment: the lines after the #! line that start with #
  sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$script_file"
}

usage_error() { # MESSAGE
  echo "$script: $1 (see $script --help)" >&2
  exit 2
}

# build_release PRODUCT…: release builds, quiet unless one fails; leaves the binaries' folder in
# $bin and the server in $ringcast.
bin=.build/release
ringcast=$bin/ringcast
build_release() {
  local product
  for product in "$@"; do
    swift build -c release --product "$product" >"$work/build.log" 2>&1 || {
      cat "$work/build.log" >&2
      fail "swift build -c release --product $product failed"
    }
    echo "$script: $(tail -n 1 "$work/build.log")" >&2
  done
}

refserver=Benchmarks/reference/refserver
build_reference() { make -s -C Benchmarks/reference >&2; }

epoll_load=Benchmarks/epoll-load/epoll-load
build_epoll_load() { make -s -C Benchmarks/epoll-load >&2; }

# ringcast_config FILE [KEY=VALUE…]: a config for `ringcast serve` on 127.0.0.1, a port the kernel
# picks, a public folder of its own, warnings logged, and no limit on the publish rate (benchmarks
# publish faster than a publisher may by default), and loopback, where every load client is, held
# only to the total connection limit, not the per-address share. Each KEY=VALUE adds or replaces a key; VALUE is
# JSON where it parses as JSON (1, true), else a string (error, state.db, redis://…).
ringcast_config() {
  mkdir -p "$work/public"
  [ -f "$work/public/index.html" ] || echo '<!doctype html><title>bench</title>' >"$work/public/index.html"
  python3 - "$@" <<'PY'
import json, sys
path, *pairs = sys.argv[1:]
config = {"host": "127.0.0.1", "port": 0, "publicDir": "public", "logLevel": "warning", "maxPublishRate": 0, "limitLoopback": False}
for pair in pairs:
    key, value = pair.split("=", 1)
    try:
        config[key] = json.loads(value)
    except ValueError:
        config[key] = value
with open(path, "w") as handle:
    json.dump(config, handle)
PY
}

# Where start_server appends each server's stderr (NAME.stderr); a script that keeps its results
# points it there. How long a server may take to say where it listens, and to stop once told to
# (valgrind needs longer for both).
server_logs=$work
server_start_seconds=10
server_stop_seconds=3

# start_server NAME COMMAND…: starts COMMAND on the server's CPU, a server whose first line on
# stdout is "listening on http://HOST:PORT", and waits for that line; sets server_pid, server_url
# and server_port. Its stdout is $work/NAME.out.
start_server() {
  local name=$1
  shift
  : >"$work/$name.out" # there before the server opens it, for await_server
  "${pin_server[@]}" "$@" >"$work/$name.out" 2>>"$server_logs/$name.stderr" &
  server_pid=$!
  pids+=("$server_pid")
  await_server "$name"
}

# start_ringcast NAME CONFIG [BINARY]: `ringcast serve` (this tree's release build, or BINARY).
start_ringcast() { start_server "$1" "${3:-$ringcast}" serve --config "$2"; }

# start_reference NAME: the raw-libwebsockets reference server (build_reference builds it).
start_reference() { start_server "$1" "$refserver" --host 127.0.0.1 --port 0; }

# Nchan (nginx with Debian's libnginx-mod-nchan) is measured where it is installed.
nchan_module=/usr/lib/nginx/modules/ngx_nchan_module.so
have_nchan() { command -v nginx >/dev/null && [ -f "$nchan_module" ]; }

# start_nchan NAME: nginx with Nchan as Benchmarks/nchan/nginx.conf.in sets it up, on a free port;
# nginx says nothing when it listens, so its pid file stands for the line the others print.
start_nchan() {
  local name=$1 port folder=$work/$1.nginx step
  port=$(free_port)
  rm -rf "$folder"
  mkdir -p "$folder"
  : >"$work/$name.out"
  sed "s|@MODULE@|$nchan_module|; s|@PORT@|$port|; s|@DIR@|$folder|g" Benchmarks/nchan/nginx.conf.in >"$folder/nginx.conf"
  "${pin_server[@]}" nginx -c "$folder/nginx.conf" -p "$folder" >/dev/null 2>>"$server_logs/$name.stderr" &
  server_pid=$!
  pids+=("$server_pid")
  for step in $(seq $((server_start_seconds * 20))); do
    [ -s "$folder/nginx.pid" ] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.05
  done
  [ -s "$folder/nginx.pid" ] && echo "listening on http://127.0.0.1:$port" >"$work/$name.out"
  await_server "$name"
}

# start_by_name NAME: `reference` is the reference server, `nchan` Nchan, and any other NAME is
# `ringcast serve` with the config $work/NAME.json.
start_by_name() {
  case "$1" in
    reference) start_reference "$1" ;;
    nchan) start_nchan "$1" ;;
    *) start_ringcast "$1" "$work/$1.json" ;;
  esac
}

# await_server NAME: waits for server_pid's "listening on" line in $work/NAME.out, at most
# server_start_seconds, and ends the script with the server's output when it exits or stays silent.
await_server() {
  local name=$1 step
  server_url=""
  for step in $(seq $((server_start_seconds * 20))); do
    server_url=$(sed -n 's/^listening on //p' "$work/$name.out" | head -n 1)
    [ -n "$server_url" ] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.05
  done
  if [ -z "$server_url" ]; then
    cat "$work/$name.out" >&2
    tail -n 20 "$server_logs/$name.stderr" >&2 2>/dev/null || true
    fail "$name did not start (no \"listening on\" line within ${server_start_seconds} s; its output is above)"
  fi
  server_port=${server_url##*:}
}

# stop_server [PID]: SIGTERM, server_stop_seconds to finish, then SIGKILL (server_pid by default).
stop_server() {
  local pid=${1:-$server_pid} step kept=()
  kill -TERM "$pid" 2>/dev/null || true
  for step in $(seq $((server_stop_seconds * 20))); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  for step in "${pids[@]}"; do [ "$step" = "$pid" ] || kept+=("$step"); done
  pids=("${kept[@]}")
}

# A port nobody listens on, for servers that cannot be told to pick one (redis-server, nginx).
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# run_load TAG LOAD-OPTION…: one `ringcast load --json` run on the load generator's CPU, its
# JSON in $results/TAG.json and its stderr in $results/TAG.log. When it fails, it says so on
# stderr with the log's last line, leaves no JSON and returns 1.
run_load() {
  local tag=$1
  shift
  if ! "${pin_load[@]}" "$ringcast" load --json "$@" >"$results/$tag.json" 2>"$results/$tag.log"; then
    echo "  $tag failed: $(tail -n 1 "$results/$tag.log")" >&2
    rm -f "$results/$tag.json"
    return 1
  fi
}

# fresh_results FOLDER: an empty Benchmarks/results/FOLDER in $results, for per-run JSON and logs
# (not committed), and the servers' stderr with them.
fresh_results() {
  results=Benchmarks/results${1:+/$1}
  rm -rf "$results"
  mkdir -p "$results"
  server_logs=$results
}
