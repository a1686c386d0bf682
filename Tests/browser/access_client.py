"""A client of the access tests that runs inside a network namespace (`ip netns exec NS python3
access_client.py REQUESTS`): it makes each request of the JSON list REQUESTS and prints one JSON
list of what came back. HTTP: {"http": METHOD, "url": URL, "headers": {...}, "body": TEXT} ->
{"status", "headers", "body"}. WebSocket: {"ws": URL, "headers": {...}, "send": [TEXT], "seconds": S}
-> {"frames": [TEXT...], "close": [CODE, REASON] or null}: the frames received until the server
closed the socket or S seconds passed; a WebSocket's first snapshot is also announced with a line
"snapshot" on stderr, for a caller that waits for it. Standard library only, so it needs nothing
installed."""

import base64
import json
import os
import socket
import struct
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


def http(spec):
    request = urllib.request.Request(spec["url"], method=spec.get("http", "GET"), headers=spec.get("headers", {}),
                                     data=spec["body"].encode() if "body" in spec else None)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return {"status": answer.status, "headers": dict(answer.headers.items()), "body": answer.read().decode()}
    except urllib.error.HTTPError as refused:
        return {"status": refused.code, "headers": dict(refused.headers.items()), "body": refused.read().decode()}


def _frame(text):
    """A masked text frame, as a client must send it (RFC 6455 §5.3)."""
    payload = text.encode()
    mask = os.urandom(4)
    head = bytes([0x81])
    if len(payload) < 126:
        head += bytes([0x80 | len(payload)])
    elif len(payload) < 65536:
        head += bytes([0x80 | 126]) + struct.pack(">H", len(payload))
    else:
        head += bytes([0x80 | 127]) + struct.pack(">Q", len(payload))
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def ws(spec):
    url = urllib.parse.urlsplit(spec["ws"])
    deadline = time.monotonic() + spec.get("seconds", 3)
    sock = socket.create_connection((url.hostname, url.port), timeout=10)
    key = base64.b64encode(os.urandom(16)).decode()
    path = url.path + ("?" + url.query if url.query else "")
    lines = [f"GET {path} HTTP/1.1", f"Host: {url.netloc}", "Upgrade: websocket", "Connection: Upgrade",
             f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13"]
    lines += [f"{name}: {value}" for name, value in spec.get("headers", {}).items()]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(4096)
        if not chunk:
            return {"frames": [], "close": None, "handshake": buffer.decode(errors="replace")}
        buffer += chunk
    head, buffer = buffer.split(b"\r\n\r\n", 1)
    if b" 101 " not in head.split(b"\r\n")[0]:
        return {"frames": [], "close": None, "handshake": head.decode(errors="replace")}
    for text in spec.get("send", []):
        sock.sendall(_frame(text))
    frames, close = [], None
    while close is None and time.monotonic() < deadline:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            while len(buffer) < 2 or len(buffer) < _frame_length(buffer):
                chunk = sock.recv(65536)
                if not chunk:
                    return {"frames": frames, "close": None}
                buffer += chunk
        except TimeoutError:
            break
        length = _frame_length(buffer)
        opcode, start = buffer[0] & 0x0F, length - _payload_length(buffer)
        payload, buffer = buffer[start:length], buffer[length:]
        if opcode == 0x8:
            code = struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else None
            close = [code, payload[2:].decode(errors="replace")]
        elif opcode == 0x1:
            frames.append(payload.decode())
            if not any('"snapshot"' in frame for frame in frames[:-1]) and '"snapshot"' in frames[-1]:
                print("snapshot", file=sys.stderr, flush=True)
    sock.close()
    return {"frames": frames, "close": close}


def _payload_length(buffer):
    n = buffer[1] & 0x7F
    if n == 126:
        return struct.unpack(">H", buffer[2:4])[0] if len(buffer) >= 4 else 1 << 30
    if n == 127:
        return struct.unpack(">Q", buffer[2:10])[0] if len(buffer) >= 10 else 1 << 30
    return n


def _frame_length(buffer):
    """The length of the server frame at the start of `buffer` (unmasked), header included."""
    if len(buffer) < 2:
        return 2
    n = buffer[1] & 0x7F
    header = 2 + (2 if n == 126 else 8 if n == 127 else 0)
    return header + _payload_length(buffer)


def main():
    results = []
    for spec in json.loads(sys.argv[1]):
        results.append(ws(spec) if "ws" in spec else http(spec))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
