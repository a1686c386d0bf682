"""Cross-origin rules that match the WebSocket's, in Chromium: a page served by another local
server, whose origin is not in `allowedOrigins`, cannot read `/api/tasks` or a task's log with
`fetch()` (the answers carry no CORS header for it), nor open `/ws`, nor change anything; a page of
a listed origin reads both."""

import pytest
from harness import StaticSite


@pytest.fixture(scope="module")
def stranger():
    """Another origin the server does not list (conftest's `site` is the listed one)."""
    s = StaticSite()
    yield s
    s.close()


PROBE = """
const [url, init, done] = arguments;
fetch(url, init).then(async (r) => done({ok: true, status: r.status, text: await r.text()}),
                      (e) => done({ok: false, error: String(e)}));
"""

SOCKET = """
const [url, done] = arguments;
const ws = new WebSocket(url);
const events = [];
ws.onmessage = (m) => events.push(m.data);
ws.onclose = (e) => done({opened: events.length > 0, events, code: e.code});
setTimeout(() => { ws.close(); }, 3000);
"""


def test_another_origin_cannot_read_tasks_or_logs_while_a_listed_origin_can(driver, server, site, stranger):
    server.post("/api/tasks/cors.build", {"title": "Build with a secret"})
    server.post("/api/tasks/cors.build/log", {"lines": ["secret=hunter2"]})
    tasks, log = f"{server.base}/api/tasks", f"{server.base}/api/tasks/cors.build/log"
    driver.set_script_timeout(15)
    try:
        driver.get(stranger.write("stranger.html", "<!doctype html><title>another site</title>"))
        for url in (tasks, log):
            answer = driver.execute_async_script(PROBE, url, {})
            assert answer == {"ok": False, "error": "TypeError: Failed to fetch"}, (url, answer)
        # Changing is refused by the server itself, whatever the browser would let the page read.
        post = driver.execute_async_script(PROBE, f"{server.base}/api/tasks/cors.build/hide",
                                           {"method": "POST", "mode": "no-cors"})
        assert post["ok"] and post["status"] == 0, post  # an opaque answer: the page learns nothing
        assert server.api("GET", "/api/tasks/cors.build")["visible"] is True, "nothing was changed"
        # The WebSocket refuses the same origin.
        sock = driver.execute_async_script(SOCKET, f"{server.ws_base}/ws")
        assert not sock["opened"], sock

        driver.get(site.write("partner.html", "<!doctype html><title>listed site</title>"))
        answer = driver.execute_async_script(PROBE, tasks, {})
        assert answer["ok"] and answer["status"] == 200 and "cors.build" in answer["text"], answer
        answer = driver.execute_async_script(PROBE, log, {})
        assert answer["ok"] and "secret=hunter2" in answer["text"], answer
        sock = driver.execute_async_script(SOCKET, f"{server.ws_base}/ws?watch=cors.*")
        assert sock["opened"] and any("cors.build" in e for e in sock["events"]), sock
    finally:
        driver.get("about:blank")
        driver.get_log("browser")  # the CORS refusals this test provoked are not the next test's errors
