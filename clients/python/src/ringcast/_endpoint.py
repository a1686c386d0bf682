"""Where the server is (`RINGCAST_URL`, as the `ringcast` command line reads it) and the small
HTTP calls the client makes beside its WebSocket: reading a task or its log back."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import ssl
import threading
import time
import urllib.parse
from typing import Any

from ._errors import RingcastError
from ._proxy import FROM_ENVIRONMENT, choose, tunnel

DEFAULT_URL = "http://127.0.0.1:8080"
# The most of an HTTP answer the client reads: a task and its log tail are kilobytes.
MAX_ANSWER = 16 * 1024 * 1024


class Endpoint:
    """A server given as `http://HOST:PORT` (or `https://`, `ws://`, `wss://`); a path is kept as
    a prefix in front of `/api` and `/ws`, for a server behind a proxy under a path. `proxy` is
    the HTTP proxy both the requests and the WebSocket tunnel through (see _proxy), chosen once
    from `proxy_option` or the environment."""

    def __init__(self, url: str, ssl_context: ssl.SSLContext | None = None, proxy_option: Any = FROM_ENVIRONMENT) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https", "ws", "wss") or not parsed.hostname:
            raise RingcastError("invalid_url", f"'{url}' is not a server URL: use http://HOST:PORT", "url")
        self.url = url
        self.secure = parsed.scheme in ("https", "wss")
        self.host = parsed.hostname
        try:
            self.port = parsed.port or (443 if self.secure else 80)
        except ValueError:
            raise RingcastError("invalid_url", f"'{url}' has no valid port: use http://HOST:PORT", "url") from None
        path = parsed.path.rstrip("/")
        # `ws://HOST:PORT/ws` names the socket itself: its prefix is what comes before.
        self.base_path = path[: -len("/ws")] if path.endswith("/ws") else path
        self.ssl_context = ssl_context
        self.proxy = choose(proxy_option, self.secure, self.host, self.port)

    def path(self, rest: str) -> str:
        return self.base_path + rest

    def request(self, method: str, rest: str, body: Any = None, token: str | None = None, timeout: float = 10.0) -> Any:
        """One HTTP request, over within `timeout` seconds of the call (connecting, the answer's
        head and its body together: a server that drips its answer does not stretch it); returns
        the decoded JSON answer or raises RingcastError: the server's error body, `timeout`,
        `answer_too_large` past MAX_ANSWER (16 MiB), or `unreachable` when no answer came."""
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if token:
            headers["Authorization"] = f"Bearer {token}"
        connection: http.client.HTTPConnection
        if self.secure:
            connection = http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self.ssl_context)
        else:
            connection = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        # The socket's timeout bounds each read, not the call: at the deadline a timer shuts the
        # socket down, which ends whatever read http.client is in.
        expired = threading.Event()
        # Held here: http.client lets go of its socket once an answer that ends with the
        # connection has begun (the answer reads on through a file of its own).
        opened: list[socket.socket] = []

        def expire() -> None:
            expired.set()
            for sock in opened:
                with contextlib.suppress(OSError):
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)

        watchdog = threading.Timer(timeout, expire)
        watchdog.daemon = True
        watchdog.start()
        where = f"{method} {self.path(rest)}"
        try:
            if self.proxy is None:
                connection.connect()
            else:
                # http.client sends on a socket it finds set, without connecting one of its own.
                sock = tunnel(self.proxy, self.host, self.port, time.monotonic() + timeout, timeout)
                opened.append(sock)
                if self.secure:
                    context = self.ssl_context or ssl.create_default_context()
                    sock = context.wrap_socket(sock, server_hostname=self.host)
                connection.sock = sock
            opened.append(connection.sock)
            if expired.is_set():
                raise TimeoutError
            connection.request(method, self.path(rest), body=data, headers=headers)
            answer = connection.getresponse()
            raw = self._read_answer(answer, where, expired)
            status = answer.status
        except (OSError, http.client.HTTPException) as error:
            if expired.is_set():
                raise RingcastError(
                    "timeout", f"{self.url} did not answer {where} within {timeout:g} s; is it a Ringcast server, and is it up?"
                ) from None
            if self.proxy is not None:
                raise RingcastError("unreachable", f"could not reach {self.url} through the proxy {self.proxy.url}: {error}") from None
            raise RingcastError("unreachable", f"could not reach {self.url}: {error}; is `ringcast serve` running there?") from None
        finally:
            watchdog.cancel()
            connection.close()
        try:
            decoded = json.loads(raw) if raw else None
        except (ValueError, RecursionError):
            decoded = raw.decode("utf-8", "replace")
        if status >= 400:
            raise RingcastError.from_answer(decoded, status)
        return decoded

    def _read_answer(self, answer: http.client.HTTPResponse, where: str, expired: threading.Event) -> bytes:
        too_large = RingcastError(
            "answer_too_large",
            f"{self.url} answered {where} with more than {MAX_ANSWER >> 20} MiB (the client's limit); is it a Ringcast server?",
            status=answer.status)
        if answer.length is not None and answer.length > MAX_ANSWER:
            raise too_large
        parts: list[bytes] = []
        size = 0
        while True:
            chunk = answer.read1(65536)
            if not chunk:
                if expired.is_set():
                    raise TimeoutError
                if answer.length:
                    raise http.client.IncompleteRead(b"".join(parts), answer.length)
                return b"".join(parts)
            size += len(chunk)
            if size > MAX_ANSWER:
                raise too_large
            parts.append(chunk)
