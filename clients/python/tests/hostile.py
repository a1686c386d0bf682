"""A hostile server for the client's bounds: a raw TCP listener on 127.0.0.1 that speaks just
enough HTTP and WebSocket (RFC 6455) to be taken for a Ringcast server, and then sends what a
broken or malicious one could: endless fragments, a message in tens of thousands of frames,
nesting 200 000 deep, an HTTP answer that never ends or drips.

Every connection is recorded (when it came, its path, the bytes the client took before it went,
the close code it sent); every loop is bounded in bytes and time, so a client that fails to
defend itself fails the test instead of hanging it."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import struct
import subprocess
import sys
import textwrap
import threading
import time

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
HELLO = b'{"type":"hello","protocol":2,"heartbeat":2}'
# No test needs more than this from one connection: past it the client has certainly failed.
SEND_LIMIT = 512 * 1024 * 1024
TIME_LIMIT = 20.0


def frame(payload: bytes, opcode: int = 0x1, final: bool = True) -> bytes:
    """One unmasked frame, as a server sends it."""
    first = (0x80 if final else 0) | opcode
    length = len(payload)
    if length < 126:
        return struct.pack("!BB", first, length) + payload
    if length < 1 << 16:
        return struct.pack("!BBH", first, 126, length) + payload
    return struct.pack("!BBQ", first, 127, length) + payload


class Connection:
    def __init__(self, path: str) -> None:
        self.path = path
        self.opened = time.monotonic()
        self.sent = 0
        self.close_code: int | None = None


class HostileServer:
    """`websocket(server, sock, record)` writes what follows the handshake; `http(server, sock, record)`
    answers any other request. Either may return early; the connection is then closed."""

    def __init__(self, websocket=None, http=None) -> None:
        self.websocket = websocket
        self.http = http
        self.connections: list[Connection] = []
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def __enter__(self) -> HostileServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.stopping.set()
        self._thread.join(5)
        self._listener.close()

    def websockets(self) -> list[Connection]:
        with self._lock:
            return [c for c in self.connections if c.path.startswith("/ws")]

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                sock, _ = self._listener.accept()
            except OSError:
                continue
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        sock.settimeout(5)
        record = None
        try:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 65536:
                chunk = sock.recv(4096)
                if not chunk:
                    return
                head += chunk
            lines = head.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
            path = lines[0].split(" ")[1] if len(lines[0].split(" ")) > 1 else "/"
            fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
            record = Connection(path)
            with self._lock:
                self.connections.append(record)
            if path.startswith("/ws"):
                if self.websocket is None:
                    sock.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    return
                accept = base64.b64encode(hashlib.sha1(fields["sec-websocket-key"].encode() + _GUID).digest())
                sock.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                             b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n" + frame(HELLO))
                threading.Thread(target=self._read_close, args=(sock, record), daemon=True).start()
                self.websocket(self, sock, record)
            elif self.http is not None:
                self.http(self, sock, record)
        except OSError:
            pass
        finally:
            # The client's close frame may still be on its way to the reader.
            deadline = time.monotonic() + 2
            while record is not None and record.path.startswith("/ws") and record.close_code is None \
                    and time.monotonic() < deadline:
                time.sleep(0.02)
            sock.close()

    def _read_close(self, sock: socket.socket, record: Connection) -> None:
        """Reads the client's frames (masked) until its close frame; records the code."""
        buffer = b""
        deadline = time.monotonic() + TIME_LIMIT
        while time.monotonic() < deadline and not self.stopping.is_set():
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            if not chunk:
                return
            buffer += chunk
            while len(buffer) >= 2:
                length, offset = buffer[1] & 0x7F, 2
                if length == 126:
                    if len(buffer) < 4:
                        break
                    length, offset = struct.unpack_from("!H", buffer, 2)[0], 4
                elif length == 127:
                    if len(buffer) < 10:
                        break
                    length, offset = struct.unpack_from("!Q", buffer, 2)[0], 10
                if len(buffer) < offset + 4 + length:
                    break
                key = buffer[offset:offset + 4]
                payload = bytes(b ^ key[i & 3] for i, b in enumerate(buffer[offset + 4:offset + 4 + length]))
                opcode = buffer[0] & 0x0F
                buffer = buffer[offset + 4 + length:]
                if opcode == 0x8:
                    record.close_code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
                    return

    def send_while_taken(self, sock: socket.socket, record: Connection, piece: bytes) -> None:
        """Writes `piece` again and again while the client takes it (bounded in bytes and time)."""
        deadline = time.monotonic() + TIME_LIMIT
        while record.sent < SEND_LIMIT and time.monotonic() < deadline and not self.stopping.is_set():
            sock.sendall(piece)
            record.sent += len(piece)


def run_client(source: str, url: str, timeout: float = 60) -> dict:
    """Runs `source` in a new interpreter (so its memory and CPU are its own) with `url` as
    `URL`; the source prints one JSON line, which is returned."""
    prelude = textwrap.dedent("""
        import json, resource, sys, time
        URL = sys.argv[1]
        def peak_mib():
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        def cpu_seconds():
            usage = resource.getrusage(resource.RUSAGE_SELF)
            return usage.ru_utime + usage.ru_stime
    """)
    result = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(source), url],
                            capture_output=True, text=True, timeout=timeout, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])
