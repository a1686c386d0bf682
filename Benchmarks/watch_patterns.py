"""What idle watchers with slow watch patterns cost a publisher: the time of a 20-event batch over
HTTP (POST /api/events, keep-alive) with no watcher, then with WATCHERS idle watchers each holding a
list of near-miss patterns (`*aaaa…aZ…`: a backtracking matcher costs the id's length times the
pattern's on each), then with none again, for each server binary named, in one run.

Three lists are tried: the largest that fits an 8 KiB query argument (117 patterns of 68 bytes), the
largest a watch list may hold (32 patterns of 32 bytes), and 32 near misses that no literal start,
end or missing byte rules out. A server that refuses a list says so (the watchers it kept are
counted). Published ids are long runs of `a`, the backtracking matcher's worst case.

    python3 Benchmarks/watch_patterns.py new=.build/release/ringcast old=/path/to/older/ringcast
"""

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def hostile_list(watcher, count, filler):
    return ",".join(f"*{'a' * filler}Z{watcher:02d}{p:03d}" for p in range(count))


def unanchored_list(watcher):
    """Near misses with a wildcard at both ends and only bytes the ids hold: nothing rules them
    out before the matcher runs (each watcher's list in its own order, so each is its own set)."""
    patterns = [f"*{'a' * (1 + p % 16)}0*{'a' * (1 + p // 16)}?" for p in range(32)]
    return ",".join(patterns[watcher % 32 :] + patterns[: watcher % 32])


LISTS = [
    ("117 patterns of 68 B (8 KiB)", lambda w: hostile_list(w, 117, 61)),
    ("32 patterns of 32 B (the cap)", lambda w: hostile_list(w, 32, 25)),
    ("32 patterns, wildcards at both ends", unanchored_list),
]


def start(binary, folder):
    public = os.path.join(folder, "public")
    os.makedirs(public, exist_ok=True)
    with open(os.path.join(public, "index.html"), "w") as handle:
        handle.write("<!doctype html><title>bench</title>")
    config = os.path.join(folder, "config.json")
    with open(config, "w") as handle:
        json.dump({"host": "127.0.0.1", "port": 0, "publicDir": "public", "logLevel": "error", "maxPublishRate": 0}, handle)
    process = subprocess.Popen([binary, "serve", "--config", config], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if line.startswith("listening on "):
            return process, int(line.strip().rsplit(":", 1)[1])
        if not line and process.poll() is not None:
            break
    process.kill()
    sys.exit(f"{binary} did not start")


def open_watcher(port, watch):
    """A WebSocket that never reads after its first answer: True when the server kept it."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(
        (
            f"GET /ws?watch={watch} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    seen = b""
    sock.settimeout(0.3)
    try:
        while len(seen) < 65536:
            chunk = sock.recv(65536)
            if not chunk:
                break
            seen += chunk
    except TimeoutError:
        pass
    kept = b" 101 " in seen.split(b"\r\n", 1)[0] and b"invalid_pattern" not in seen
    return sock, kept


FRESH = iter(range(10**9))


def batch_body(round_number, fresh):
    # The same 20 tasks updated again and again, or (fresh) ids that come round again only after
    # 9 000 (more than a server keeps answers for, fewer than its maxTasks).
    ids = [f"{'a' * 100}{next(FRESH) % 9000:04d}" if fresh else f"{'a' * 100}{k:02d}" for k in range(20)]
    return json.dumps([{"type": "update", "id": i, "progress": (round_number % 100) / 100} for i in ids])


def time_batches(port, batches, fresh):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    times = []
    for n in range(batches + 10):
        body = batch_body(n, fresh)
        began = time.perf_counter()
        connection.request("POST", "/api/events", body, {"Content-Type": "application/json"})
        answer = connection.getresponse()
        answer.read()
        took = time.perf_counter() - began
        if answer.status != 200:
            sys.exit(f"POST /api/events answered {answer.status}")
        if n >= 10:  # the first ten warm up
            times.append(took * 1000)
    connection.close()
    return times


def describe(times):
    times = sorted(times)
    return f"median {statistics.median(times):7.3f} ms  p90 {times[int(len(times) * 0.9)]:7.3f} ms"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binaries", nargs="+", metavar="NAME=BINARY")
    parser.add_argument("--watchers", type=int, default=20)
    parser.add_argument("--batches", type=int, default=200, help="timed batches of 20 events per measurement")
    parser.add_argument("--fresh-ids", action="store_true", help="a new task id for every event, not 20 updated again")
    args = parser.parse_args()
    ids = "a new id for each event" if args.fresh_ids else "the same 20 ids"
    print(f"{args.batches} batches of 20 events each ({ids}); {args.watchers} idle watchers; {os.cpu_count()} cores")
    for named in args.binaries:
        name, binary = named.split("=", 1)
        with tempfile.TemporaryDirectory() as folder:
            process, port = start(binary, folder)
            try:
                for label, make in LISTS:
                    none_before = time_batches(port, args.batches, args.fresh_ids)
                    watchers = [open_watcher(port, make(w)) for w in range(args.watchers)]
                    kept = sum(1 for _, k in watchers if k)
                    with_watchers = time_batches(port, args.batches, args.fresh_ids)
                    for sock, _ in watchers:
                        sock.close()
                    time.sleep(0.3)
                    none_after = time_batches(port, args.batches, args.fresh_ids)
                    none = statistics.median(none_before + none_after)
                    ratio = statistics.median(with_watchers) / none
                    print(f"{name}: {label}")
                    print(f"  no watcher        {describe(none_before + none_after)}")
                    print(f"  {kept:2d} kept of {args.watchers:2d}    {describe(with_watchers)}   ({ratio:.2f}x)")
            finally:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


if __name__ == "__main__":
    main()
