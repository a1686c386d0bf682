"""Browser notifications in headless Chromium against the real server.

The test grants the permission with CDP `Browser.grantPermissions` (the bell still asks for it:
Notification.requestPermission then answers at once), records every Notification the page makes
by wrapping `window.Notification` before the page's modules load (CDP
`Page.addScriptToEvaluateOnNewDocument`), and decides whether the page is in front: focus is
emulated (`Emulation.setFocusEmulationEnabled`) so the tab counts as focused, and the test's
`__setFront(false)` makes `document.hasFocus()` answer false, as when another window has the
focus. One case hides the tab for real (another tab in front: visibilityState 'hidden')."""

import pytest

SPY = """
window.__notes = [];
window.__asked = 0;
const NativeNotification = window.Notification;
if (NativeNotification) {
  window.Notification = class extends NativeNotification {
    constructor(title, options) {
      super(title, options);
      window.__notes.push({title, body: options && options.body, tag: options && options.tag});
    }
    static requestPermission(...args) {
      window.__asked++;
      return NativeNotification.requestPermission(...args);
    }
  };
}
let front = true;
window.__setFront = (on) => { front = on; };
const realHasFocus = Document.prototype.hasFocus;
Document.prototype.hasFocus = function () { return front && realHasFocus.call(this); };
// While __offline is set, the page's reconnects go nowhere (a closed port), so the test can
// change tasks while the page is away and see what its resync brings.
window.__sockets = [];
window.__offline = false;
const NativeWebSocket = window.WebSocket;
window.WebSocket = class extends NativeWebSocket {
  constructor(url, protocols) {
    super(window.__offline ? 'ws://127.0.0.1:9/' : url, protocols);
    window.__sockets.push(this);
  }
};
"""


@pytest.fixture
def spied(page):
    d = page.driver
    script = d.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": SPY})["identifier"]
    d.execute_cdp_cmd("Emulation.setFocusEmulationEnabled", {"enabled": True})
    yield page
    d.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", {"identifier": script})
    d.execute_cdp_cmd("Emulation.setFocusEmulationEnabled", {"enabled": False})
    d.execute_cdp_cmd("Browser.resetPermissions", {})


def notes(page):
    return page.js("return window.__notes")


def bell(page):
    return page.js("""const b = document.getElementById('bell');
        return {state: b.dataset.state, pressed: b.getAttribute('aria-pressed'), disabled: b.getAttribute('aria-disabled'),
                title: b.title, shown: b.checkVisibility(), asked: window.__asked};""")


def test_bell_notifies_done_failed_stalled_once_and_not_in_front(spied, server):
    page = spied
    d = page.driver
    d.execute_cdp_cmd("Browser.grantPermissions", {"origin": server.base, "permissions": ["notifications"]})
    post = server.post
    post("/api/tasks/nt.a", {"title": "Build A", "progress": 0.2})
    post("/api/tasks/nt.b", {"title": "Build B", "progress": 0.2})
    post("/api/tasks/nt.c", {"title": "Build C", "progress": 0.2})
    post("/api/tasks/nt.front", {"title": "Watched in front", "progress": 0.2})
    post("/api/tasks/nt.old", {"title": "Finished before", "progress": 1, "state": "done"})
    page.open("nt.*")
    page.js("localStorage.removeItem('ringcast.notifications')")
    d.refresh()
    page.wait_ready()
    # Off until the person clicks; nothing asked on load.
    assert bell(page) == {"state": "off", "pressed": "false", "disabled": None, "shown": True, "asked": 0,
                          "title": "Notify me when a task finishes, fails or stalls"}
    d.find_element("id", "bell").click()
    page.wait(lambda: bell(page)["state"] == "on", 2, "the bell does not turn on")
    assert bell(page)["pressed"] == "true" and bell(page)["asked"] == 1
    page.shot(f"{page.name}-bell-on")

    # In front (visible and focused): no notification.
    assert page.js("return document.visibilityState === 'visible' && document.hasFocus()")
    page.sync(post("/api/tasks/nt.front", {"state": "done"})["seq"])
    assert page.card_info("nt.front")["state"] == "done"
    assert notes(page) == []

    # Another window has the focus: one notification each, with the title and the state.
    page.js("__setFront(false)")
    post("/api/tasks/nt.a", {"progress": 1, "state": "done", "detail": "412 files"})
    page.wait(lambda: len(notes(page)) >= 1, 3, "no notification for done")
    post("/api/tasks/nt.b", {"state": "failed", "detail": "exit status 1"})
    page.wait(lambda: len(notes(page)) >= 2, 3, "no notification for failed")
    # At most one per task and state: done again after a re-run, and more updates, add nothing.
    post("/api/tasks/nt.a", {"state": "running", "progress": 0.5})
    post("/api/tasks/nt.a", {"state": "done"})
    page.sync(post("/api/tasks/nt.b", {"detail": "exit status 1 (retried)"})["seq"])
    got = notes(page)
    assert [(n["title"], n["body"]) for n in got] == [("Build A", "Done · 412 files"),
                                                      ("Build B", "Failed · exit status 1")], got
    assert got[0]["tag"] != got[1]["tag"]

    # Away and back: the resync snapshot brings nt.a and nt.b again (not news: same states) and
    # nt.c, which failed meanwhile (news: notified once).
    # Chromium reports the refused port either as a failed connection or, when the page's CSP is
    # checked first, as a connect-src violation: both are this test's own doing.
    page.allowed_console.append(r"ws://127\.0\.0\.1:9/.* failed")
    page.allowed_console.append(r"Connecting to 'ws://127\.0\.0\.1:9/' violates")
    page.js("__offline = true; __sockets[__sockets.length - 1].close()")
    page.wait(lambda: page.status()["state"] != "live", 3, "the page did not notice the close")
    post("/api/tasks/nt.a", {"detail": "412 files, cached"})
    post("/api/tasks/nt.b", {"detail": "exit status 1, logs kept"})
    post("/api/tasks/nt.c", {"state": "failed", "detail": "timeout"})
    page.js("__offline = false")
    page.wait(lambda: page.status()["state"] == "live", 20, "the page did not come back")
    page.wait(lambda: page.card_info("nt.c")["state"] == "failed", 3, "the resync did not bring nt.c")
    page.sync(post("/api/tasks/nt.c", {"detail": "timeout after 30 s"})["seq"])
    got = notes(page)
    assert [(n["title"], n["body"]) for n in got][2:] == [("Build C", "Failed · timeout")], got
    assert page.js("return __sockets[__sockets.length - 1].url").find("since=") > 0

    # A hidden tab (another tab in front) is notified too, here of a stall (a lease running out).
    page.js("__setFront(true)")
    post("/api/tasks/nt.lease", {"title": "Worker", "progress": 0.1, "staleAfter": 1})
    page.wait(lambda: page.card_info("nt.lease"), 2, "no card for nt.lease")
    dashboard = d.current_window_handle
    d.execute_cdp_cmd("Emulation.setFocusEmulationEnabled", {"enabled": False})  # else the tab stays visible
    d.switch_to.new_window("tab")
    try:
        page.wait(lambda: server.api("GET", "/api/tasks/nt.lease")["state"] == "stalled", 5, "no stall")
    finally:
        d.close()
        d.switch_to.window(dashboard)
        d.execute_cdp_cmd("Page.bringToFront", {})
        d.execute_cdp_cmd("Emulation.setFocusEmulationEnabled", {"enabled": True})
    assert page.js("return document.visibilityState") == "visible"
    page.wait(lambda: len(notes(page)) >= 4, 3, "no notification for the stall in a hidden tab")
    page.wait_ready()
    page.sync(post("/api/tasks/nt.lease", {"title": "Worker"})["seq"])
    got = notes(page)
    assert [(n["title"], n["body"]) for n in got][3:] == [("Worker", "Stalled")], got

    # The choice sticks across a reload; a click turns it off.
    d.refresh()
    page.wait_ready()
    assert bell(page)["state"] == "on" and bell(page)["asked"] == 0
    d.find_element("id", "bell").click()
    page.wait(lambda: bell(page)["state"] == "off", 2, "the bell does not turn off")
    page.js("__setFront(false)")
    page.sync(post("/api/tasks/nt.front", {"state": "failed"})["seq"])
    assert notes(page) == [], "notified while turned off"


def test_bell_shows_blocked(spied, server):
    page = spied
    d = page.driver
    d.execute_cdp_cmd("Browser.setPermission", {"origin": server.base, "permission": {"name": "notifications"},
                                                "setting": "denied"})
    server.post("/api/tasks/nb.a", {"title": "A", "progress": 0.5})
    page.open("nb.*")
    got = bell(page)
    assert got["state"] == "blocked" and got["disabled"] == "true" and "blocked" in got["title"], got
    d.find_element("id", "bell").click()
    assert bell(page)["state"] == "blocked" and bell(page)["asked"] == 0
    page.js("__setFront(false)")
    page.sync(server.post("/api/tasks/nb.a", {"state": "done"})["seq"])
    assert notes(page) == []
    page.shot()


def test_widget_notifies_when_asked_to(spied, server, site):
    page = spied
    d = page.driver
    d.execute_cdp_cmd("Browser.grantPermissions", {"origin": site.origin, "permissions": ["notifications"]})
    server.post("/api/tasks/wn.export", {"title": "Nightly export", "progress": 0.4})
    server.post("/api/tasks/wn.plain", {"title": "No bell here", "progress": 0.4})
    url = site.partner_page("partner-notify.html", server, f"""
  <ringcast-task id="with" server="{server.ws_base}" task="wn.export" notify></ringcast-task>
  <ringcast-task id="without" server="{server.ws_base}" task="wn.plain"></ringcast-task>""")
    d.get(url)
    page.js("localStorage.removeItem('ringcast.notifications')")
    d.refresh()
    find_bell = "const b = document.getElementById(arguments[0]).shadowRoot.querySelector('.bell'); return b && !b.hidden ? b : null;"
    widget_bell = page.wait(lambda: page.js(find_bell, "with"), 5, "no bell in the widget with notify")
    assert page.js(find_bell, "without") is None, "a bell without the notify attribute"
    assert widget_bell.get_attribute("data-state") == "off" and page.js("return __asked") == 0
    widget_bell.click()
    page.wait(lambda: widget_bell.get_attribute("data-state") == "on", 2, "the widget's bell does not turn on")
    page.js("__setFront(false)")
    server.post("/api/tasks/wn.plain", {"state": "done"})
    server.post("/api/tasks/wn.export", {"state": "done", "progress": 1})
    page.wait(lambda: len(notes(page)) >= 1, 3, "the widget did not notify")
    read = "return document.getElementById(arguments[0]).shadowRoot.querySelector('.badge').textContent"
    page.wait(lambda: page.js(read, "without") == "Done", 3, "the plain widget did not update")
    server.post("/api/tasks/wn.export", {"detail": "again"})
    detail = "return document.getElementById('with').shadowRoot.querySelector('.detail').textContent"
    page.wait(lambda: page.js(detail) == "again", 3, "the widget did not get the update")
    assert [(n["title"], n["body"]) for n in notes(page)] == [("Nightly export", "Done")], notes(page)
    page.shot()
