"""The client through Debian's tinyproxy on loopback: the environment's proxy (or the `proxy`
option) carries the WebSocket and the HTTP reads by CONNECT, which the proxy's log shows;
NO_PROXY naming the server's host sends them direct; a proxy that refuses CONNECT is an error
naming it and its status."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import time

import pytest
from conftest import wait_for
from harness import Server

from ringcast import Ringcast, RingcastError

PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy")


class Tinyproxy:
    def __init__(self, folder, extra: str = "") -> None:
        binary = shutil.which("tinyproxy") or "/usr/bin/tinyproxy"
        if not shutil.which(binary):
            raise AssertionError("tinyproxy is not installed: scripts/deps.sh test installs it")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.log = folder / "tinyproxy.log"
        config = folder / "tinyproxy.conf"
        # No ConnectPort line unless `extra` has one: CONNECT to any port (the server's is ephemeral).
        config.write_text(
            f'Port {self.port}\nListen 127.0.0.1\nTimeout 30\nLogFile "{self.log}"\nLogLevel Connect\n'
            f"MaxClients 50\nAllow 127.0.0.1\n{extra}")
        self.process = subprocess.Popen([binary, "-d", "-c", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self._listening, 10, f"tinyproxy listening on {self.port}")

    def _listening(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def tunnels(self, port: int) -> int:
        """The CONNECTs the proxy's log shows to `port`."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return sum(f"CONNECT 127.0.0.1:{port} " in line for line in text.splitlines())

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


@pytest.fixture
def proxy(tmp_path, monkeypatch):
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    started = Tinyproxy(tmp_path)
    yield started
    started.stop()


def publish_and_read(url: str, task_id: str, **options) -> dict:
    client = Ringcast(url, **options)
    try:
        client.update(task_id, progress=0.4, title="proxied")
        client.flush(timeout=10)
        return client.get(task_id)
    finally:
        client.close(timeout=5)


def test_the_environments_proxy_carries_the_websocket_and_the_reads_by_connect(live, proxy, task_id, monkeypatch):
    port = live.server.port
    monkeypatch.setenv("http_proxy", proxy.url)
    task = publish_and_read(live.url, task_id)
    assert task["progress"] == 0.4
    # One tunnel for the publishing WebSocket, one for the read.
    assert wait_for(lambda: proxy.tunnels(port) >= 2, 5, "two CONNECTs in the proxy's log")
    assert live.task(task_id)["title"] == "proxied"


def test_upper_case_https_proxy_is_not_taken_for_a_plain_http_server(live, proxy, task_id, monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    publish_and_read(live.url, task_id)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    publish_and_read(live.url, task_id)
    assert wait_for(lambda: proxy.tunnels(live.server.port) >= 2, 5, "HTTP_PROXY's two CONNECTs")
    time.sleep(0.3)
    assert proxy.tunnels(live.server.port) == 2, "HTTPS_PROXY alone is for https and wss servers"


@pytest.mark.parametrize("no_proxy", ["127.0.0.1", "localhost, 127.0.0.1", "*", "127.0.0.1:PORT"], ids=["host", "list", "star", "port"])
def test_no_proxy_naming_the_server_sends_it_direct(live, proxy, task_id, monkeypatch, no_proxy):
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", no_proxy.replace("PORT", str(live.server.port)))
    assert publish_and_read(live.url, task_id)["progress"] == 0.4
    time.sleep(0.3)
    assert proxy.tunnels(live.server.port) == 0, proxy.log.read_text(errors="replace") if proxy.log.exists() else ""


def test_the_proxy_option_overrides_the_environment(live, proxy, task_id, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    publish_and_read(live.url, task_id, proxy=None)
    time.sleep(0.3)
    assert proxy.tunnels(live.server.port) == 0
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    publish_and_read(live.url, task_id, proxy=proxy.url)
    assert wait_for(lambda: proxy.tunnels(live.server.port) >= 2, 5, "the option's two CONNECTs")


def test_a_proxy_that_refuses_connect_is_an_error_naming_it_and_its_status(live, tmp_path, monkeypatch):
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    refusing = Tinyproxy(tmp_path, "ConnectPort 443\n")
    try:
        client = Ringcast(live.url, proxy=refusing.url, timeout=5)
        try:
            with pytest.raises(RingcastError) as raised:
                client.get("py.anything")
        finally:
            client.close(timeout=1)
        assert raised.value.error == "unreachable"
        assert refusing.url in str(raised.value) and "403" in str(raised.value), str(raised.value)
    finally:
        refusing.stop()


def test_a_proxy_url_that_is_not_http_is_refused_at_once(live):
    with pytest.raises(RingcastError) as raised:
        Ringcast(live.url, proxy="socks5://127.0.0.1:1080")
    assert raised.value.field == "proxy"


def test_an_https_server_is_reached_by_tls_inside_the_tunnel_verified_as_without_a_proxy(proxy, task_id, monkeypatch):
    server = Server(heartbeat=2, tls=True)
    server.start()
    try:
        port = server.port
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        trusted = ssl.create_default_context(cafile=str(server.cert))
        task = publish_and_read(server.base, task_id, ssl_context=trusted)
        assert task["progress"] == 0.4
        assert wait_for(lambda: proxy.tunnels(port) >= 2, 5, "the wss and https CONNECTs")
        # The server's certificate is still checked, now through the tunnel: unknown to the
        # default store, the read fails on it.
        client = Ringcast(server.base, timeout=5)
        try:
            with pytest.raises(RingcastError) as raised:
                client.get(task_id)
        finally:
            client.close(timeout=1)
        assert "CERTIFICATE_VERIFY_FAILED" in str(raised.value), str(raised.value)
        assert proxy.tunnels(port) >= 3
    finally:
        server.stop()
