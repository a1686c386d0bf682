"""A TCP proxy that injects faults between a Ringcast node and Redis, as toxiproxy does: every
chunk is held `latency` ± `jitter` ms (uniformly; order is kept, so a later chunk never overtakes
an earlier one), and every second each open connection is reset (RST, both sides) with
probability `reset`. On SIGTERM it prints what it did as one JSON line and exits. (A partition is
the harness's own: it takes a veth link down.)

    python3 faultproxy.py --listen 127.0.0.1:7000 --to 198.18.1.2:6379 --latency 50 --jitter 20 --reset 0.05
"""

import argparse
import asyncio
import json
import random
import signal
import socket
import struct

stats = {"connections": 0, "resets": 0, "chunks": 0, "bytes": 0}


def parse_address(text):
    host, port = text.rsplit(":", 1)
    return host, int(port)


async def pump(reader, writer, options, rng):
    """Copies reader to writer, each chunk delayed; the delivery times never run backwards."""
    queue = asyncio.Queue()
    loop = asyncio.get_running_loop()

    async def deliver():
        while True:
            due, chunk = await queue.get()
            if chunk is None:
                break
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(chunk)
            await writer.drain()

    sender = asyncio.create_task(deliver())
    last_due = 0.0
    try:
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                break
            delay = max(0.0, options.latency + rng.uniform(-options.jitter, options.jitter)) / 1000
            last_due = max(last_due, loop.time() + delay)
            stats["chunks"] += 1
            stats["bytes"] += len(chunk)
            await queue.put((last_due, chunk))
        await queue.put((0, None))
        await sender
    except (ConnectionError, OSError, asyncio.CancelledError):
        sender.cancel()
    finally:
        writer.close()


def reset(writer):
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def handle(client_reader, client_writer, options, rng):
    stats["connections"] += 1
    try:
        upstream_reader, upstream_writer = await asyncio.wait_for(asyncio.open_connection(*options.to), 3)
    except (OSError, asyncio.TimeoutError):
        reset(client_writer)
        return
    pumps = [asyncio.create_task(pump(client_reader, upstream_writer, options, rng)),
             asyncio.create_task(pump(upstream_reader, client_writer, options, rng))]

    async def chaos():
        while True:
            await asyncio.sleep(1)
            if rng.random() < options.reset:
                stats["resets"] += 1
                reset(client_writer)
                reset(upstream_writer)
                return

    monkey = asyncio.create_task(chaos())
    await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
    monkey.cancel()
    for task in pumps:
        task.cancel()
    for writer in (client_writer, upstream_writer):
        writer.close()


async def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--listen", type=parse_address, required=True, help="HOST:PORT to accept on")
    parser.add_argument("--to", type=parse_address, required=True, help="HOST:PORT to forward to")
    parser.add_argument("--latency", type=float, default=0, help="ms each chunk is held, on average")
    parser.add_argument("--jitter", type=float, default=0, help="± ms around --latency, uniformly")
    parser.add_argument("--reset", type=float, default=0, help="probability a connection is reset in each second")
    parser.add_argument("--seed", type=int, default=1, help="seed of the fault choices")
    options = parser.parse_args()
    rng = random.Random(options.seed)
    server = await asyncio.start_server(lambda r, w: handle(r, w, options, rng), *options.listen)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    print("ready", flush=True)
    async with server:
        await stop.wait()
    print(json.dumps(stats), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
