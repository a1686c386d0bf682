"""Where the server is (`RINGCAST_URL`, as the `ringcast` command line reads it) and the small
HTTP calls the client makes beside its WebSocket: reading a task or its log back."""

from __future__ import annotations

import http.client
import json
import ssl
import urllib.parse
from typing import Any

from ._errors import RingcastError

DEFAULT_URL = "http://127.0.0.1:8080"


class Endpoint:
    """A server given as `http://HOST:PORT` (or `https://`, `ws://`, `wss://`); a path is kept as
    a prefix in front of `/api` and `/ws`, for a server behind a proxy under a path."""

    def __init__(self, url: str, ssl_context: ssl.SSLContext | None = None) -> None:
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

    def path(self, rest: str) -> str:
        return self.base_path + rest

    def request(self, method: str, rest: str, body: Any = None, token: str | None = None, timeout: float = 10.0) -> Any:
        """One HTTP request; returns the decoded JSON answer or raises RingcastError (the server's
        error body, or `unreachable` when no answer came)."""
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
        try:
            connection.request(method, self.path(rest), body=data, headers=headers)
            answer = connection.getresponse()
            raw = answer.read()
            status = answer.status
        except OSError as error:
            raise RingcastError("unreachable", f"could not reach {self.url}: {error}; is `ringcast serve` running there?") from None
        finally:
            connection.close()
        try:
            decoded = json.loads(raw) if raw else None
        except ValueError:
            decoded = raw.decode("utf-8", "replace")
        if status >= 400:
            raise RingcastError.from_answer(decoded, status)
        return decoded
