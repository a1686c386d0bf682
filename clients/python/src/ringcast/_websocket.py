"""A small RFC 6455 WebSocket client over the standard library's socket: what the publisher
thread needs and nothing more. Text frames out (masked, as a client must), text frames in
(fragments put together), ping answered with pong, close answered and reported.

The server is not trusted with the client's memory: a message (all its fragments together) over
MAX_MESSAGE bytes, or in more than MAX_FRAGMENTS frames, ends the connection with 1009 before
its bytes are kept; a frame RFC 6455 forbids a server to send, with 1002; text that is not
UTF-8, with 1007. Each raises ProtocolViolation, which the owner reports and backs off on.

One thread owns a connection: nothing here takes a lock. Reads are driven from outside: the
owner waits on `fileno()` with select, then calls `receive()`, which returns the complete
messages read so far and never blocks for more."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import socket
import ssl
import struct
import time

from ._proxy import Proxy, tunnel

_ACCEPT_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_MESSAGE = 16 * 1024 * 1024
MAX_FRAGMENTS = 4096
_MAX_HEADER = 64 * 1024

_CONTINUATION, _TEXT, _BINARY, _CLOSE, _PING, _PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


class ConnectionClosed(OSError):
    """The peer closed the connection (`code` from its close frame, 1006 when it just went away)."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"closed ({code}{': ' + reason if reason else ''})")
        self.code = code
        self.reason = reason


class ProtocolViolation(ConnectionClosed):
    """The server broke the protocol or one of the client's bounds; the client closes with `code`
    (1002 protocol, 1007 bad text, 1009 too big) and `reason` says what it sent."""


class HandshakeRefused(OSError):
    """The server answered the upgrade with an HTTP status other than 101; `body` is its answer."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"the server refused the WebSocket upgrade with HTTP {status}: {body[:300]}")
        self.status = status
        self.body = body


def _mask(payload: bytes, key: bytes) -> bytes:
    """XOR with the 4-byte key, as whole big integers (far faster in Python than byte by byte)."""
    length = len(payload)
    if length == 0:
        return b""
    stream = (key * (length // 4 + 1))[:length]
    return (int.from_bytes(payload, "little") ^ int.from_bytes(stream, "little")).to_bytes(length, "little")


def encode_frame(opcode: int, payload: bytes) -> bytes:
    """One final, masked frame."""
    length = len(payload)
    if length < 126:
        header = struct.pack("!BB", 0x80 | opcode, 0x80 | length)
    elif length < 1 << 16:
        header = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, length)
    else:
        header = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, length)
    key = os.urandom(4)
    return header + key + _mask(payload, key)


class WebSocket:
    """An open client connection. Make one with `connect`."""

    def __init__(self, sock: socket.socket, buffered: bytes) -> None:
        self._sock = sock
        self._buffer = bytearray(buffered)
        # Bytes not looked at yet (what came with the handshake's answer); what stays in the
        # buffer after a parse is an incomplete frame, which only more reading can finish.
        self._unparsed = bool(buffered)
        self._fragments: list[bytes] = []
        # Kept as running totals: summing the fragments again at each one made a message of
        # 40 000 one-byte fragments cost seconds of CPU.
        self._fragment_bytes = 0
        self._fragment_opcode: int | None = None
        self._closed = False
        # A close frame that came behind messages in the same read: those are returned first (an
        # error event before the close that follows it), and the close is raised by the next call.
        self._pending_close: ConnectionClosed | None = None

    @classmethod
    def connect(
        cls,
        host: str,
        port: int,
        path: str,
        *,
        secure: bool,
        headers: list[tuple[str, str]],
        timeout: float,
        ssl_context: ssl.SSLContext | None = None,
        proxy: Proxy | None = None,
    ) -> WebSocket:
        """Opens the TCP (and TLS) connection and upgrades it; raises OSError (HandshakeRefused for
        an HTTP answer other than 101). `timeout` bounds the whole handshake (a server that
        drips its answer a byte at a time does not hold it longer; through `proxy`, its CONNECT
        too), and each read and write from then on."""
        deadline = time.monotonic() + timeout
        if proxy is not None:
            sock = tunnel(proxy, host, port, deadline, timeout)
        else:
            sock = socket.create_connection((host, port), timeout=timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if secure:
                context = ssl_context or ssl.create_default_context()
                sock = context.wrap_socket(sock, server_hostname=host)
            key = base64.b64encode(os.urandom(16)).decode("ascii")
            host_header = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            lines = [
                f"GET {path} HTTP/1.1",
                f"Host: {host_header}",
                "Upgrade: websocket",
                "Connection: Upgrade",
                f"Sec-WebSocket-Key: {key}",
                "Sec-WebSocket-Version: 13",
            ]
            lines += [f"{name}: {value}" for name, value in headers]
            sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            head, rest = _read_head(sock, deadline, timeout)
            status_line, _, header_text = head.partition("\r\n")
            parts = status_line.split(" ", 2)
            status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
            fields = _parse_headers(header_text)
            if status != 101:
                body = rest
                wanted = int(fields.get("content-length", "0") or 0)
                while len(body) < min(wanted, _MAX_HEADER):
                    chunk = _recv_before(sock, deadline, timeout)
                    if not chunk:
                        break
                    body += chunk
                raise HandshakeRefused(status, body.decode("utf-8", "replace"))
            expected = base64.b64encode(hashlib.sha1(key.encode("ascii") + _ACCEPT_GUID).digest()).decode("ascii")
            if fields.get("sec-websocket-accept") != expected:
                raise OSError("the server's WebSocket handshake did not accept our key")
            sock.settimeout(timeout)
            return cls(sock, rest)
        except BaseException:
            sock.close()
            raise

    def fileno(self) -> int:
        return self._sock.fileno()

    def has_buffered(self) -> bool:
        """Whether bytes wait that select would not report: leftovers of the handshake, or TLS
        records the ssl module has decrypted already."""
        return self._unparsed or self._pending_close is not None or self.tls_pending()

    def tls_pending(self) -> bool:
        pending = getattr(self._sock, "pending", None)
        return bool(pending and pending())

    def send_text(self, payload: bytes) -> None:
        self._sock.sendall(encode_frame(_TEXT, payload))

    def receive(self, readable: bool = True) -> list[str]:
        """Returns the complete text messages that have arrived, reading the socket first when
        `readable` (select said so, or TLS holds decrypted bytes); without it, only what is
        buffered already (the handshake's answer may have brought the first frames with it).
        Raises ConnectionClosed when the peer has closed, after the messages that came before it."""
        if self._pending_close is not None:
            raise self._pending_close
        if readable:
            try:
                chunk = self._sock.recv(65536)
            except ssl.SSLWantReadError:
                chunk = None
            if chunk == b"":
                # What came before the end is still read: the server's last words (an error event,
                # its close frame) often arrive together with it.
                self._pending_close = ConnectionClosed(1006, "the server went away")
            if chunk:
                self._buffer += chunk
        messages = self._parse()
        if not messages and self._pending_close is not None:
            raise self._pending_close
        return messages

    def _parse(self) -> list[str]:
        self._unparsed = False
        messages: list[str] = []
        buffer = self._buffer
        while True:
            if len(buffer) < 2:
                break
            first, second = buffer[0], buffer[1]
            opcode, final = first & 0x0F, bool(first & 0x80)
            length = second & 0x7F
            offset = 2
            if length == 126:
                if len(buffer) < 4:
                    break
                length = struct.unpack_from("!H", buffer, 2)[0]
                offset = 4
            elif length == 127:
                if len(buffer) < 10:
                    break
                length = struct.unpack_from("!Q", buffer, 2)[0]
                offset = 10
            # Judged from the header alone, before the payload is read and kept.
            self._check_frame(first, second, opcode, final, length)
            if len(buffer) < offset + length:
                break
            payload = bytes(buffer[offset:offset + length])
            del buffer[:offset + length]
            if opcode == _PING:
                self._sock.sendall(encode_frame(_PONG, payload))
            elif opcode == _PONG:
                continue
            elif opcode == _CLOSE:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
                reason = payload[2:].decode("utf-8", "replace")
                self._answer_close(payload[:2])
                if messages:
                    self._pending_close = ConnectionClosed(code, reason)
                    break
                raise ConnectionClosed(code, reason)
            else:
                if opcode != _CONTINUATION:
                    self._fragment_opcode = opcode
                    self._fragments = []
                    self._fragment_bytes = 0
                self._fragments.append(payload)
                self._fragment_bytes += length
                if final:
                    whole = b"".join(self._fragments)
                    text = self._fragment_opcode == _TEXT
                    self._fragments = []
                    self._fragment_bytes = 0
                    self._fragment_opcode = None
                    if text:
                        try:
                            messages.append(whole.decode("utf-8"))
                        except UnicodeDecodeError:
                            raise ProtocolViolation(1007, "the server sent a text message that is not UTF-8") from None
        return messages

    def _check_frame(self, first: int, second: int, opcode: int, final: bool, length: int) -> None:
        """Raises ProtocolViolation for a frame the client will not take (RFC 6455 5.1-5.5)."""
        if second & 0x80:
            raise ProtocolViolation(1002, "the server sent a masked frame")
        if first & 0x70:
            raise ProtocolViolation(1002, "the server sent a frame with reserved bits set")
        if opcode >= 0x8:
            if opcode not in (_CLOSE, _PING, _PONG):
                raise ProtocolViolation(1002, f"the server sent a frame of unknown opcode {opcode}")
            if not final or length > 125:
                raise ProtocolViolation(1002, "the server sent a fragmented or over-long control frame")
            return
        if opcode not in (_CONTINUATION, _TEXT, _BINARY):
            raise ProtocolViolation(1002, f"the server sent a frame of unknown opcode {opcode}")
        continuing = opcode == _CONTINUATION
        if continuing != (self._fragment_opcode is not None):
            raise ProtocolViolation(
                1002, "the server sent a continuation frame with no message begun" if continuing
                else "the server began a message before it finished the one before")
        held = self._fragment_bytes if continuing else 0
        if held + length > MAX_MESSAGE:
            raise ProtocolViolation(1009, f"the server sent a message of more than {MAX_MESSAGE >> 20} MiB (the client's limit)")
        if continuing and len(self._fragments) >= MAX_FRAGMENTS:
            raise ProtocolViolation(1009, f"the server sent a message in more than {MAX_FRAGMENTS} fragments (the client's limit)")

    def _answer_close(self, code: bytes) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):
            self._sock.sendall(encode_frame(_CLOSE, code))

    def close(self, code: int = 1000) -> None:
        """Sends a close frame (once) and closes the socket without waiting for the answer."""
        if not self._closed:
            self._closed = True
            with contextlib.suppress(OSError):
                self._sock.sendall(encode_frame(_CLOSE, struct.pack("!H", code)))
        with contextlib.suppress(OSError):
            self._sock.close()


def _recv_before(sock: socket.socket, deadline: float, timeout: float) -> bytes:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise OSError(f"the server did not finish its WebSocket handshake within {timeout:g} s")
    sock.settimeout(remaining)
    return sock.recv(4096)


def _read_head(sock: socket.socket, deadline: float, timeout: float) -> tuple[str, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > _MAX_HEADER:
            raise OSError("the server's handshake answer has no end of headers")
        chunk = _recv_before(sock, deadline, timeout)
        if not chunk:
            raise OSError("the server closed the connection during the WebSocket handshake")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head.decode("latin-1"), rest


def _parse_headers(text: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in text.split("\r\n"):
        name, sep, value = line.partition(":")
        if sep:
            fields[name.strip().lower()] = value.strip()
    return fields
