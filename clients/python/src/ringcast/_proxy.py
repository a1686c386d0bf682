"""Which HTTP proxy carries a connection to the server, and the tunnel through it.

The environment is read as `requests` and `websocket-client` read it (the standard library's
`getproxies()` and `proxy_bypass()`): `https_proxy` / `HTTPS_PROXY` for https:// and wss://
servers, `http_proxy` / `HTTP_PROXY` for http:// and ws://, `no_proxy` / `NO_PROXY` for hosts
that go direct (lower case first). An explicit `proxy` given to the client overrides all of it.

Every connection through a proxy is an HTTP CONNECT tunnel, plain http:// too (not an
absolute-URI request to the proxy): the WebSocket needs a tunnel anyway, and one way of going
through keeps the HTTP reads and the WebSocket on the same footing. TLS to the server (https,
wss) runs inside the tunnel, verified against the server's own name as without a proxy."""

from __future__ import annotations

import base64
import socket
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from ._errors import RingcastError


class _FromEnvironment:
    def __repr__(self) -> str:
        return "FROM_ENVIRONMENT"


# The default of a client's `proxy`: read the environment for each server URL.
FROM_ENVIRONMENT: Any = _FromEnvironment()
_MAX_HEAD = 64 * 1024


@dataclass(frozen=True)
class Proxy:
    url: str
    host: str
    port: int
    authorization: str | None

    @classmethod
    def parse(cls, url: str) -> Proxy:
        # `host:port` without a scheme is how many set the variables; curl and requests take it.
        parsed = urllib.parse.urlsplit(url if "://" in url else "http://" + url)
        if parsed.scheme != "http" or not parsed.hostname:
            raise RingcastError(
                "invalid_proxy", f"'{url}' is not an HTTP proxy URL: use http://HOST:PORT", "proxy")
        try:
            port = parsed.port or 80
        except ValueError:
            raise RingcastError("invalid_proxy", f"'{url}' has no valid port: use http://HOST:PORT", "proxy") from None
        authorization = None
        if parsed.username is not None:
            credentials = f"{urllib.parse.unquote(parsed.username)}:{urllib.parse.unquote(parsed.password or '')}"
            authorization = "Basic " + base64.b64encode(credentials.encode("utf-8")).decode("ascii")
        shown = f"http://{parsed.hostname}:{port}" if ":" not in parsed.hostname else f"http://[{parsed.hostname}]:{port}"
        return cls(shown, parsed.hostname, port, authorization)


def choose(option: Any, secure: bool, host: str, port: int) -> Proxy | None:
    """The proxy for a server at `host:port`: `option` when it was given (None: direct), else the
    environment's for the scheme, unless NO_PROXY names the host."""
    if option is not FROM_ENVIRONMENT:
        return Proxy.parse(option) if option else None
    url = urllib.request.getproxies().get("https" if secure else "http")
    if not url:
        return None
    if urllib.request.proxy_bypass(f"{host}:{port}") or urllib.request.proxy_bypass(host):
        return None
    return Proxy.parse(url)


def tunnel(proxy: Proxy, host: str, port: int, deadline: float, timeout: float) -> socket.socket:
    """A TCP connection to the proxy on which CONNECT `host:port` succeeded; the bytes that
    follow are the server's. Raises OSError naming the proxy when it cannot be reached, refuses
    (its status), or does not answer before `deadline`."""
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        sock = socket.create_connection((proxy.host, proxy.port), timeout=max(0.001, deadline - time.monotonic()))
    except OSError as error:
        raise OSError(f"could not reach the proxy {proxy.url}: {error}") from None
    try:
        lines = [f"CONNECT {target} HTTP/1.1", f"Host: {target}"]
        if proxy.authorization:
            lines.append(f"Proxy-Authorization: {proxy.authorization}")
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        # Read a byte at a time up to the blank line: what follows belongs to the server (its TLS
        # handshake, or nothing yet), and must stay in the socket.
        head = bytearray()
        while not head.endswith(b"\r\n\r\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise OSError(f"the proxy {proxy.url} did not answer CONNECT {target} within {timeout:g} s")
            if len(head) > _MAX_HEAD:
                raise OSError(f"the proxy {proxy.url} answered CONNECT {target} with no end of headers")
            sock.settimeout(remaining)
            byte = sock.recv(1)
            if not byte:
                raise OSError(f"the proxy {proxy.url} closed the connection before answering CONNECT {target}")
            head += byte
        status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = status_line.split(" ", 2)
        status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        if not 200 <= status < 300:
            raise OSError(
                f"the proxy {proxy.url} refused CONNECT {target} with HTTP {status_line[9:].strip() or status}; "
                "does it allow CONNECT to that port (or should NO_PROXY name the host)?")
        sock.settimeout(timeout)
        return sock
    except BaseException:
        sock.close()
        raise
