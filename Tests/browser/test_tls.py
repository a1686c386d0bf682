"""The dashboard over https:// and wss://: a server with `"tls"` in its
config.json and a certificate made by openssl for this run, a publisher that verifies it, and a
Chromium that accepts it and no other."""

import re
import urllib.error
import urllib.request

import pytest
from conftest import Page
from harness import Server, make_driver, spki_hash


@pytest.fixture(scope="module")
def tls_server():
    s = Server(heartbeat=2, tls=True).start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def tls_driver(tls_server):
    # Not --ignore-certificate-errors, which would accept any certificate: Chromium accepts the
    # errors of a self-signed certificate only on a chain holding this run's key.
    d = make_driver(trust_spki=[spki_hash(tls_server.cert)])
    yield d
    d.quit()


def severe_console(driver):
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def test_dashboard_over_https_updates_live_over_wss(tls_server, tls_driver):
    server = tls_server
    assert re.fullmatch(r"listening on https://127\.0\.0\.1:\d+\s*", server.first_line), server.first_line
    assert server.base.startswith("https://") and server.ws_base.startswith("wss://")

    # Records the WebSockets the page opens (injected by DevTools before the page's own scripts).
    tls_driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": """
        const Native = window.WebSocket;
        window.__sockets = [];
        window.WebSocket = class extends Native {
          constructor(...args) { super(...args); window.__sockets.push(this); }
        };"""})
    tls_driver.get("about:blank")
    tls_driver.get_log("browser")
    page = Page(tls_driver, server, "tls-dashboard")
    page.open()
    assert page.js("return location.protocol") == "https:"
    assert page.js("return location.origin") == server.base
    assert page.js("return window.isSecureContext") is True

    # Published over https with verification on (the API helpers trust only this certificate).
    seq = server.post("/api/tasks/secure.deploy", {"title": "Deploy over TLS", "progress": 0.25})["seq"]
    page.sync(seq)
    page.wait(lambda: (page.card_info("secure.deploy") or {}).get("valuenow") == "25", 5,
              "the ring did not appear")
    # The page was not reloaded: the update came over its socket, which on this port is wss.
    page.js("window.__sameDocument = true")
    seq = server.post("/api/tasks/secure.deploy", {"progress": 0.8, "detail": "served over wss"})["seq"]
    page.sync(seq)
    info = page.wait(lambda: (lambda i: i if i and i["valuenow"] == "80" else None)(page.card_info("secure.deploy")),
                     5, "the ring did not move")
    assert info["detail"] == "served over wss" and info["state"] == "running"
    assert page.js("return window.__sameDocument") is True
    assert page.status()["state"] == "live"
    # What the page opened: one wss:// socket to this server, open.
    sockets = page.js("return window.__sockets.map((w) => [w.url, w.readyState])")
    assert sockets == [[server.ws_base + "/ws?watch=*", 1]], sockets
    page.shot()
    assert not severe_console(tls_driver)


def test_the_publishing_side_checks_the_certificate(tls_server):
    # Without the certificate in its trust store, urllib refuses the server: verification is on.
    with pytest.raises(urllib.error.URLError) as refused:
        urllib.request.urlopen(tls_server.base + "/healthz", timeout=5)
    assert "CERTIFICATE_VERIFY_FAILED" in str(refused.value)
    with urllib.request.urlopen(tls_server.base + "/healthz", timeout=5, context=tls_server.ssl_context) as r:
        assert r.status == 200


def test_the_browser_trusts_this_runs_certificate_only(tls_server, tls_driver):
    other = Server(heartbeat=2, tls=True).start()  # its own certificate, with another key
    try:
        tls_driver.get(other.base + "/")
        # Chromium shows its certificate error page, not the dashboard.
        assert tls_driver.execute_script("return document.getElementById('dashboard')") is None
        assert "ERR_CERT" in tls_driver.page_source
    finally:
        other.stop()
