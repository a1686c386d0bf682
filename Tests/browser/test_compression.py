"""The dashboard with `"compression": true`: Chromium asks for permessage-deflate by itself, the
server agrees, and the page renders its snapshot and live updates through the deflated socket."""

import pytest
from conftest import Page
from harness import Server, make_driver


@pytest.fixture(scope="module")
def deflating_server():
    s = Server(heartbeat=2, settings={"compression": True}).start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def deflating_driver():
    d = make_driver()
    yield d
    d.quit()


def test_dashboard_works_over_a_deflated_socket(deflating_server, deflating_driver):
    server = deflating_server
    # A snapshot larger than one piece of lws's deflater, so it reaches the page in several.
    for i in range(200):
        server.post(f"/api/tasks/deflate.held{i:03d}", {"title": f"Held {i}", "progress": 0.5,
                                                         "detail": "a line that deflates well " * 20})
    # Records the WebSockets the page opens (injected by DevTools before the page's own scripts).
    deflating_driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": """
        const Native = window.WebSocket;
        window.__sockets = [];
        window.WebSocket = class extends Native {
          constructor(...args) { super(...args); window.__sockets.push(this); }
        };"""})
    page = Page(deflating_driver, server, "compression-dashboard")
    page.open("deflate.*")
    extensions = page.js("return window.__sockets.map(s => s.extensions)")
    assert extensions and all("permessage-deflate" in e for e in extensions), extensions

    page.wait(lambda: len(page.ids()) == 200, 5, "the snapshot's cards did not all render")
    assert page.card_info("deflate.held007")["valuenow"] == "50"
    seq = server.post("/api/tasks/deflate.held007", {"progress": 0.75})["seq"]
    page.sync(seq)
    page.wait(lambda: page.card_info("deflate.held007")["valuenow"] == "75", 5, "the update did not render")
    seq = server.post("/api/tasks/deflate.new", {"title": "New one", "progress": 0.1})["seq"]
    page.sync(seq)
    assert page.card_info("deflate.new")["valuenow"] == "10"
    severe = [e["message"] for e in deflating_driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not severe, severe
    page.shot()
