"""What the tqdm mirror costs a loop: a 100 000-iteration tqdm loop timed with plain tqdm and with
ringcast.tqdm, side by side (alternating, in one process, against a real server), and the messages
the mirror sent for each loop, counted by the client and by the server's /metrics.

    flock /work/bench.lock .build/clients-venv/bin/python clients/python/benchmarks/tqdm_overhead.py

Two bodies: an empty one (tqdm's own cost, and the mirror's, are all there is) and one of about
10 µs of work a step (a loop that does something). The timed region is the bar's creation, the
loop and the bar's close; the client is made (and connected) once, before, as a program's first
bar would make it once. The server is RINGCAST_BIN (default the debug build) on a free port, or
--server URL."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "Tests" / "browser"))
os.environ.setdefault("RINGCAST_BIN", str(REPO / ".build" / "debug" / "ringcast"))

import tqdm as plain  # noqa: E402
from harness import Server  # noqa: E402

import ringcast  # noqa: E402
import ringcast.tqdm as mirrored  # noqa: E402


def server_messages(url: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith("ringcast_client_messages_total "):
                return float(line.split()[1])
    raise SystemExit("the server's /metrics has no ringcast_client_messages_total")


def empty(_: int) -> None:
    pass


def work(i: int) -> None:
    # About 10 µs on this machine: a little arithmetic a step.
    sum(range(i % 7, 300))


def run(cls, body, iterations: int, sink, **mirror) -> tuple[float, float]:
    """Wall time, and CPU time of the whole process (the client's thread included)."""
    started, cpu = time.perf_counter(), time.process_time()
    for i in cls(range(iterations), file=sink, **mirror):
        body(i)
    return time.perf_counter() - started, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=100_000)
    parser.add_argument("--trials", type=int, default=31, help="loops of each kind, alternating")
    parser.add_argument("--server", help="a running server's URL (default: start one)")
    args = parser.parse_args()

    server = None
    url = args.server
    if url is None:
        server = Server(heartbeat=15)
        server.start()
        url = server.base
    sink = open(os.devnull, "w")  # noqa: SIM115 (both kinds print to the same place)
    try:
        made = time.perf_counter()
        rc = ringcast.Ringcast(url)
        created = time.perf_counter() - made
        rc.update("bench.tqdm", title="tqdm overhead")
        rc.flush()
        print(f"server {url}; {args.iterations} iterations a loop, {args.trials} loops of each kind, alternating")
        print(f"Ringcast() made and connected in {(time.perf_counter() - made) * 1000:.1f} ms (the constructor itself: {created * 1000:.2f} ms)")
        print()
        print("| body | plain tqdm: wall s, median (min) | ringcast.tqdm: wall s, median (min) | wall ratio: of medians (of mins) "
              "| wall ratio, median of pairs | CPU ratio, median of pairs | messages a loop (client) | messages a loop (server) |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for name, body in (("empty", empty), ("~10 µs of work", work)):
            run(plain.tqdm, body, 1000, sink)  # warm up both
            run(mirrored.tqdm, body, 1000, sink, ringcast_task="bench.tqdm.warm", ringcast_client=rc)
            rc.flush()
            plain_times, mirror_times, client_messages, server_counts = [], [], [], []
            for trial in range(args.trials):
                plain_times.append(run(plain.tqdm, body, args.iterations, sink))
                before_client = rc.stats.frames + rc.stats.markers
                before_server = server_messages(url)
                mirror_times.append(run(mirrored.tqdm, body, args.iterations, sink, ringcast_task=f"bench.tqdm.{trial}", ringcast_client=rc))
                rc.flush()
                client_messages.append(rc.stats.frames + rc.stats.markers - before_client)
                server_counts.append(server_messages(url) - before_server)
            p, m = statistics.median(t for t, _ in plain_times), statistics.median(t for t, _ in mirror_times)
            p_min, m_min = min(t for t, _ in plain_times), min(t for t, _ in mirror_times)
            # Each mirrored loop against the plain loop just before it: the machine's load drifts less
            # within a pair than across the run.
            paired = statistics.median(mt / pt for (pt, _), (mt, _) in zip(plain_times, mirror_times))
            cpu = statistics.median(mc / pc for (_, pc), (_, mc) in zip(plain_times, mirror_times))
            print(f"| {name} | {p:.4f} ({p_min:.4f}) | {m:.4f} ({m_min:.4f}) | {m / p:.3f} ({m_min / p_min:.3f}) | {paired:.3f} | {cpu:.3f} "
                  f"| {min(client_messages)}–{max(client_messages)} | {int(min(server_counts))}–{int(max(server_counts))} |")
            if os.environ.get("BENCH_VERBOSE"):
                print("plain", [round(t, 4) for t, _ in plain_times], file=sys.stderr)
                print("mirror", [round(t, 4) for t, _ in mirror_times], file=sys.stderr)
        rc.close()
    finally:
        sink.close()
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
