#!/bin/sh
# Publish throughput: updates accepted per second over HTTP keep-alive one by one, HTTP batches and
# WebSocket, each beside the same load against the raw libwebsockets reference server
# (Benchmarks/reference) and beside plain HTTP 200 answers (GET /healthz) from the same server.
# Builds in release mode; extra arguments go to ringcast-bench (see `ringcast-bench --help`).
#
#   Benchmarks/publish.sh                     # the defaults: 20 000 requests, 200 000 frames, 3 runs
#   Benchmarks/publish.sh --runs 1 --frames 50000
set -eu
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"

swift build -c release --product ringcast >&2
swift build -c release --product ringcast-bench >&2
make -s -C Benchmarks/reference refserver >&2
bin=$(swift build -c release --show-bin-path)

. Benchmarks/scratch.sh

# Starts server NAME (the command follows), which prints "listening on http://HOST:PORT" first;
# leaves its URL in $url.
start() {
    name=$1; shift
    "$@" >"$work/$name.out" 2>"$work/$name.err" &
    pids="$pids $!"
    for _ in $(seq 100); do
        url=$(sed -n 's/^listening on //p' "$work/$name.out" | head -n 1)
        [ -n "$url" ] && return
        sleep 0.05
    done
    echo "publish.sh: $name did not start: $(cat "$work/$name.err")" >&2
    exit 1
}

mkdir -p "$work/public"
printf '{"host":"127.0.0.1","port":0,"publicDir":"%s","logLevel":"error","anonymousLocalPublish":true,"maxPublishRate":0}\n' "$work/public" >"$work/config.json"
start ringcast "$bin/ringcast" serve --config "$work/config.json"
ringcast_url=$url
start reference Benchmarks/reference/refserver --host 127.0.0.1 --port 0
reference_url=$url

echo "ringcast $ringcast_url, reference $reference_url; $(nproc) cores" >&2
"$bin/ringcast-bench" --target "ringcast=$ringcast_url" --target "reference=$reference_url" "$@"
