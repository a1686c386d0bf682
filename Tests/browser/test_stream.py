"""`GET /api/stream` in headless Chromium: a real EventSource (snapshot, events, a server restart
resumed by Last-Event-ID without a full snapshot, a full snapshot once the history is gone), and
the dashboard behind Debian's nginx: over EventSource when nginx does not forward the WebSocket
upgrade (a ring still fills), over the WebSocket when it does."""

import json

import pytest
from harness import Server
from nginx_proxy import NginxProxy

# Chromium logs each refused connection while a server is down, and the WebSocket nginx answers 404.
REFUSED = r"(WebSocket connection to .* failed|api/stream.* net::ERR_CONNECTION_REFUSED|Failed to load resource)"

RECORD = """
    window.__events = [];
    const es = new EventSource(arguments[0]);
    window.__es = es;
    for (const type of ['hello', 'snapshot', 'progress', 'state', 'heartbeat']) {
      es.addEventListener(type, (m) => __events.push({type, id: m.lastEventId, data: JSON.parse(m.data)}));
    }"""


@pytest.fixture
def kept_server(tmp_path):
    s = Server(heartbeat=1, workdir=tmp_path / "server", storage=tmp_path / "ringcast.db")
    s.start()
    yield s
    s.stop()


def events(page, type_=None):
    got = page.js("return window.__events")
    return [e for e in got if type_ is None or e["type"] == type_]


def test_event_source_resumes_by_last_event_id(page, kept_server, tmp_path):
    server = kept_server
    page.server = server
    page.allowed_console.append(REFUSED)
    server.post("/api/tasks/es.build", {"title": "Build", "progress": 0.2})
    server.post("/api/tasks/other.job", {"title": "Other", "progress": 0.2})
    page.driver.get(server.base + "/healthz")
    page.js(RECORD, "/api/stream?watch=es.*")
    page.wait(lambda: events(page, "snapshot"), 5, "no snapshot over EventSource")
    hello, snapshot = events(page)[:2]
    assert hello["type"] == "hello" and hello["data"]["protocol"] == 6
    epoch = hello["data"]["epoch"]
    assert snapshot["data"]["full"] is True
    assert [t["id"] for t in snapshot["data"]["tasks"]] == ["es.build"], "watch=es.* holds"

    server.post("/api/tasks/other.job", {"progress": 0.4})
    answer = server.post("/api/tasks/es.build", {"progress": 0.5})
    page.wait(lambda: events(page, "progress"), 5, "no progress event")
    progress = events(page, "progress")[0]
    assert progress["data"]["id"] == "es.build" and progress["data"]["progress"] == 0.5
    assert progress["id"] == f"{epoch}:{answer['seq']}", "lastEventId is EPOCH:SEQ"

    # A restart: the browser reconnects by itself, sending Last-Event-ID.
    port = server.port
    server.stop()
    page.wait(lambda: page.js("return __es.readyState") == 0, 5, "EventSource did not notice the restart")
    page.js("__events.length = 0")
    server.start(port=port)
    server.post("/api/tasks/es.build", {"progress": 0.8})
    page.wait(lambda: events(page, "snapshot"), 15, "no snapshot after the restart")
    hello, delta = events(page)[:2]
    assert hello["data"]["epoch"] == epoch
    assert delta["data"]["full"] is False, delta
    assert delta["data"]["since"] == answer["seq"], "resumed from the last event id"
    assert [(t["id"], t["progress"]) for t in delta["data"]["tasks"]] == [("es.build", 0.8)]

    # The history is gone (another database, another epoch): a full snapshot.
    server.stop()
    server.storage.unlink()
    page.wait(lambda: page.js("return __es.readyState") == 0, 5, "EventSource did not notice the stop")
    page.js("__events.length = 0")
    server.start(port=port)
    server.post("/api/tasks/es.fresh", {"progress": 0.1})
    page.wait(lambda: events(page, "snapshot"), 15, "no snapshot after the history went")
    hello, full = events(page)[:2]
    assert hello["data"]["epoch"] != epoch
    assert full["data"]["full"] is True
    assert [t["id"] for t in full["data"]["tasks"]] == ["es.fresh"]
    page.js("__es.close()")


def ring(page, task_id):
    info = page.card_info(task_id)
    return info and info["valuenow"]


@pytest.mark.parametrize("upgrades", [False, True], ids=["without-upgrade", "with-upgrade"])
def test_dashboard_behind_nginx(page, server, upgrades):
    proxy = NginxProxy(server.port)
    try:
        if not upgrades:
            page.allowed_console.append(REFUSED)
        prefix = f"nx{int(upgrades)}"
        server.post(f"/api/tasks/{prefix}.ring", {"title": "Ring", "progress": 0.1})
        page.driver.get(proxy.base(upgrades) + f"/?watch={prefix}.*")
        page.wait_ready(15)
        status = page.js("const s = document.getElementById('status');"
                         "return {transport: s.dataset.transport, text: s.textContent.trim()};")
        expected = "websocket" if upgrades else "eventsource"
        assert status["transport"] == expected, status
        assert ("WebSocket" if upgrades else "EventSource") in status["text"], status
        page.wait(lambda: ring(page, f"{prefix}.ring") == "10", 5, "the card is not shown")
        for step in (0.4, 0.7, 1.0):
            server.post(f"/api/tasks/{prefix}.ring", {"progress": step})
            page.wait(lambda s=step: ring(page, f"{prefix}.ring") == str(round(s * 100)), 5, f"the ring did not reach {step}")
        assert page.js("return document.getElementById('status').dataset.state") == "live"
        page.shot()
    finally:
        proxy.close()


def test_widget_falls_back_to_event_source(page, server):
    proxy = NginxProxy(server.port)
    try:
        page.allowed_console.append(REFUSED)
        server.post("/api/tasks/wg.ring", {"title": "Widget ring", "progress": 0.3})
        base = proxy.base(False)
        page.driver.get(base + "/healthz")
        page.js("""
            const s = document.createElement('script');
            s.type = 'module';
            s.src = '/ringcast-widget.js';
            document.body.append(s);""")
        page.wait(lambda: page.js("return !!customElements.get('ringcast-task')"), 5, "the widget did not load")
        page.js(f"""
            const w = document.createElement('ringcast-task');
            w.setAttribute('server', {json.dumps(base.replace('http', 'ws', 1))});
            w.setAttribute('task', 'wg.ring');
            document.body.append(w);""")
        transport = page.wait(lambda: page.js(
            "const w = document.querySelector('ringcast-task');"
            "const dot = w.shadowRoot && w.shadowRoot.querySelector('.dot');"
            "return dot && dot.dataset.state === 'live' && dot.dataset.transport;"), 15, "the widget is not live")
        assert transport == "eventsource"
    finally:
        proxy.close()


def test_dashboard_over_event_source_rides_out_a_restart(page, kept_server):
    server = kept_server
    page.server = server
    proxy = NginxProxy(server.port)
    try:
        # While the server is down nginx answers the stream 502, which Chromium reports.
        page.allowed_console.append(REFUSED)
        page.allowed_console.append(r"EventSource|/api/stream")
        server.post("/api/tasks/rr.keep", {"title": "Keep", "progress": 0.2})
        page.driver.get(proxy.base(False) + "/?watch=rr.*")
        page.wait_ready(15)
        assert page.js("return document.getElementById('status').dataset.transport") == "eventsource"
        page.wait(lambda: ring(page, "rr.keep") == "20", 5, "the card is not shown")
        port = server.port
        server.stop()
        page.wait(lambda: page.status()["state"] != "live", 10, "the page did not notice the server going")
        server.start(port=port)
        server.post("/api/tasks/rr.keep", {"progress": 0.6})
        server.post("/api/tasks/rr.new", {"title": "New", "progress": 0.3})
        page.wait(lambda: page.status()["state"] == "live", 30, "the page did not come back")
        assert page.js("return document.getElementById('status').dataset.transport") == "eventsource"
        page.wait(lambda: ring(page, "rr.keep") == "60" and ring(page, "rr.new") == "30", 5, "the page does not show the new state")
        page.shot()
    finally:
        proxy.close()
