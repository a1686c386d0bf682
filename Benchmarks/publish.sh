#!/usr/bin/env bash
# Publish throughput: updates accepted per second over HTTP keep-alive one by one, HTTP batches and
# WebSocket, each beside the same load against the raw libwebsockets reference server
# (Benchmarks/reference) and beside plain HTTP 200 answers (GET /healthz) from the same server.
# Builds in release mode; extra arguments go to ringcast-bench (see `ringcast-bench --help`).
#
#   Benchmarks/publish.sh                     # the defaults: 20 000 requests, 200 000 frames, 3 runs
#   Benchmarks/publish.sh --runs 1 --frames 50000
. "$(dirname "$0")/lib.sh"
pass_options=1
parse_options "$@"
# One client, one request at a time: nothing is pinned, as these figures have always been taken.
pin_server=()
pin_load=()

build_release ringcast ringcast-bench
build_reference

ringcast_config "$work/config.json" logLevel=error anonymousLocalPublish=true
start_ringcast ringcast "$work/config.json"
ringcast_url=$server_url
start_reference reference
reference_url=$server_url

echo "ringcast $ringcast_url, reference $reference_url; $(nproc) cores" >&2
"$bin/ringcast-bench" --target "ringcast=$ringcast_url" --target "reference=$reference_url" "${rest[@]}"
