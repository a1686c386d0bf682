"""The grid tells the truth at a glance: an order two reloads keep, an ETA that greys out when its
publisher goes quiet, a refused filter that says why, a cancel no publisher received that says
so and can be withdrawn, focus that stays on the card after Cancel, and a 360 px phone that never
scrolls sideways."""

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys


def test_two_reloads_give_the_same_order(page, server):
    # Published out of order, updated in another order: the grid does not follow either.
    for task_id, body in [("ord.m", {"progress": 0.2}), ("ord.b", {"progress": 0.5}), ("ord.z", {"state": "failed"}),
                          ("ord.a", {"progress": None}), ("ord.s", {"progress": 0.1, "staleAfter": 0.3}),
                          ("ord.c", {"state": "failed"})]:
        server.post(f"/api/tasks/{task_id}", body)
    page.wait(lambda: server.api("GET", "/api/tasks/ord.s")["state"] == "stalled", 5, "no stall")
    server.post("/api/tasks/ord.b", {"progress": 0.6})
    server.post("/api/tasks/ord.a", {"detail": "touched last"})
    expected = ["ord.c", "ord.z", "ord.s", "ord.a", "ord.b", "ord.m"]  # failed, stalled, then by id
    orders = []
    for _ in range(3):
        page.open("ord.*")
        page.wait(lambda: len(page.section_ids("live")) == 6, 3, "not every card")
        orders.append(page.section_ids("live"))
    assert orders == [expected] * 3, orders


def test_a_stopped_tasks_eta_greys_out(page, server):
    server.post("/api/tasks/quiet.copy", {"title": "Copy", "progress": 0.1})
    answer = server.post("/api/tasks/quiet.copy", {"progress": 0.2})
    assert answer["task"].get("eta") is not None, answer
    page.open("quiet.*")
    eta = "return document.querySelector('.task[data-id=\"quiet.copy\"] .eta')"
    page.wait(lambda: page.js(eta + ".textContent").startswith("ETA"), 3, "no ETA while updates come")
    assert not page.js(eta + ".classList.contains('quiet')")
    # The publisher says nothing more: after QUIET_MS (10 s, js/face.js) the ETA is not believed.
    page.wait(lambda: page.js(eta + ".textContent").startswith("no update for"), 14, "the ETA never greyed")
    assert page.js(eta + ".classList.contains('quiet')")
    elapsed = page.js("return document.querySelector('.task[data-id=\"quiet.copy\"] .clock').textContent")
    assert elapsed.startswith("elapsed 0:1"), elapsed
    # An update makes it live again.
    server.post("/api/tasks/quiet.copy", {"progress": 0.3})
    page.wait(lambda: page.js(eta + ".textContent").startswith("ETA"), 3, "the ETA did not come back")


def test_a_refused_watch_shows_the_servers_message(page, server):
    page.driver.get(server.base + "/?watch=ci.[bad")
    page.wait(lambda: page.js("return !document.getElementById('watch-problem').hidden"), 5, "no message")
    text = page.js("return document.getElementById('watch-problem').textContent")
    assert "refused the filter “ci.[bad”" in text and "[" in text, text
    page.wait(lambda: page.js("const s = document.getElementById('splash'); return !s || s.hidden"), 3, "the splash stays")
    link = page.driver.find_element(By.CSS_SELECTOR, "#watch-problem a")
    link.click()
    page.wait_ready()
    assert "watch=" not in page.driver.current_url
    # A filter that matches nothing says so (not "nothing in progress").
    page.open("nothing.here.*")
    page.wait(lambda: page.js("return !document.getElementById('empty').hidden"), 3, "no empty state")
    assert page.js("return document.getElementById('empty-title').textContent").startswith("No task matches “nothing.here.*”")


def test_an_undelivered_cancel_says_so_and_can_be_withdrawn(page, server):
    server.post("/api/tasks/nobody.job", {"title": "Nobody listens", "progress": 0.3, "controls": ["cancel"]})
    page.open("nobody.*")
    button = "return document.querySelector('.task[data-id=\"nobody.job\"] button[data-action=cancel]')"
    page.wait(lambda: page.js(button), 3, "no Cancel")
    page.js(button).click()
    page.js(button).click()  # asked once: confirmed
    note = "return document.querySelector('.task[data-id=\"nobody.job\"] .action-note')"
    page.wait(lambda: "Queued: no publisher connected" in page.js(note + ".textContent"), 5, "no word of the queue")
    assert server.api("GET", "/api/tasks/nobody.job")["cancelRequested"] is True
    page.js(note + ".querySelector('button[data-action=withdraw]')").click()
    page.wait(lambda: server.api("GET", "/api/tasks/nobody.job").get("cancelRequested") is None, 5, "not withdrawn")
    page.wait(lambda: page.js(note + ".hidden"), 3, "the note stays")
    page.wait(lambda: page.js(button) is not None, 3, "Cancel does not come back")
    assert server.api("GET", "/api/tasks/nobody.job")["state"] == "running"


def test_focus_stays_on_the_card_after_cancel(page, server):
    server.post("/api/tasks/focus.job", {"title": "Keep focus", "progress": 0.3, "controls": ["cancel"]})
    page.open("focus.*")
    button = "return document.querySelector('.task[data-id=\"focus.job\"] button[data-action=cancel]')"
    page.wait(lambda: page.js(button), 3, "no Cancel")
    page.js("arguments[0].focus()", page.js(button))
    page.js(button).send_keys(Keys.ENTER)
    assert page.js("return document.activeElement.dataset.action") == "cancel", "the confirm keeps focus"
    page.js(button).send_keys(Keys.ENTER)
    page.wait(lambda: server.api("GET", "/api/tasks/focus.job").get("cancelRequested") is True, 5, "not asked")
    page.wait(lambda: page.js(button) is None, 3, "the button stays")
    assert page.js("return document.activeElement.dataset.id") == "focus.job", \
        page.js("return document.activeElement.outerHTML.slice(0, 120)")
    # Arrow keys move between cards; one Tab stop a card (its steps are reached by arrows).
    server.post("/api/tasks/focus.next", {"title": "Next", "progress": 0.1})
    server.post("/api/tasks/focus.next.step", {"title": "Step", "progress": 0.1, "parent": "focus.next"})
    page.wait(lambda: page.card("focus.next.step") is not None, 3, "no step")
    assert page.js("return document.querySelector('.task[data-id=\"focus.next.step\"]').tabIndex") == -1
    page.js("return document.activeElement").send_keys(Keys.ARROW_RIGHT)
    assert page.js("return document.activeElement.dataset.id") == "focus.next"


def test_at_360_px_nothing_scrolls_sideways(page, server):
    server.post("/api/tasks/phone.a-very-long-identifier-that-does-not-break-easily-0123456789",
                {"title": "A long title " * 8, "detail": "x" * 200, "progress": 0.4, "controls": ["cancel", "pause"],
                 "url": "https://ci.example.com/" + "a" * 120})
    server.post("/api/tasks/phone.b", {"title": "Second", "progress": None})
    d = page.driver
    d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": 360, "height": 780, "deviceScaleFactor": 1, "mobile": True})
    try:
        page.open("phone.*")
        page.wait(lambda: len(page.ids()) == 2, 3, "cards")
        widths = page.js("return [document.documentElement.scrollWidth, document.documentElement.clientWidth, innerWidth]")
        assert widths[0] <= widths[1] == 360, widths
        columns = page.js("return getComputedStyle(document.querySelector('.chunk')).gridTemplateColumns.split(' ').length")
        assert columns == 1
        small = page.js("""return [...document.querySelectorAll('button:not([hidden]), input, summary')]
            .filter((e) => e.getClientRects().length)
            .map((e) => [e.id || e.className, e.getBoundingClientRect().width, e.getBoundingClientRect().height])
            .filter(([, w, h]) => w < 44 || h < 44);""")
        assert small == [], small
        open_task = f"{server.base}/tasks/phone.a-very-long-identifier-that-does-not-break-easily-0123456789"
        d.get(open_task)
        page.wait(lambda: page.js("return document.getElementById('status').dataset.state") == "live", 10, "task page")
        widths = page.js("return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        assert widths[0] <= widths[1], widths
    finally:
        d.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_waiting_work_looks_queued_not_busy(page, server):
    server.post("/api/tasks/wait.step", {"title": "Not started", "progress": 0})
    page.open("wait.*")
    card = "return document.querySelector('.task[data-id=\"wait.step\"]')"
    page.wait(lambda: page.js(card + "?.dataset.queued") == "true", 3, "no queued look")
    assert page.js(card + ".querySelector('.badge').textContent") == "Queued"
    server.post("/api/tasks/wait.step", {"progress": 0.1})
    page.wait(lambda: page.js(card + ".dataset.queued") is None, 3, "still queued once it runs")
