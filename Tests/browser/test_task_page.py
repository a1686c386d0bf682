"""A task's own page (/tasks/{id}): a card opens it, its log follows new lines and pauses when
asked, its timeline says who asked for a cancel, its chart draws the kind's past runs with the
median, and a reload or a shared link opens the same page, live."""

import time

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys


def open_task(page, task_id):
    page.driver.get(f"{page.server.base}/tasks/{task_id}")
    page.wait(lambda: page.js("return document.getElementById('status').dataset.state") == "live", 10,
              "the task page did not become live")
    page.wait(lambda: page.js("return document.getElementById('hero-title').textContent") != "", 5,
              "the task page shows no title")


def test_a_card_opens_its_page_by_click_and_by_enter(page, server):
    server.post("/api/tasks/tp.open-1", {"title": "Open me", "progress": 0.25, "url": "https://ci.example.com/runs/1"})
    page.open("tp.open-*")
    page.wait(lambda: page.card("tp.open-1") is not None, 5, "no card")
    link = page.driver.find_element(By.CSS_SELECTOR, '.task[data-id="tp.open-1"] a.open')
    assert link.get_attribute("href") == f"{server.base}/tasks/tp.open-1"
    assert page.js("return document.querySelector('.task[data-id=\"tp.open-1\"] .task-url').href") == \
        "https://ci.example.com/runs/1", "the task's link is on its card"
    link.click()
    page.wait(lambda: page.driver.current_url == f"{server.base}/tasks/tp.open-1", 5, "the link did not open the page")
    page.wait(lambda: page.js("return document.getElementById('hero-title').textContent") == "Open me", 10, "not the task's page")
    assert page.js("return document.querySelector('#hero .ring').getAttribute('aria-valuenow')") == "25"
    assert page.js("return document.querySelector('#hero .task-url').href") == "https://ci.example.com/runs/1"

    # Enter on a focused card goes there too.
    page.open("tp.open-*")
    page.card("tp.open-1").send_keys(Keys.ENTER)
    page.wait(lambda: page.driver.current_url == f"{server.base}/tasks/tp.open-1", 5, "Enter did not open the page")


SAFE_LINKS = """
const done = arguments[arguments.length - 1];
import('/js/dom.js').then((m) => done(arguments[0].map((u) => m.safeLink(u))), (e) => done(String(e)));
"""


def test_a_link_is_shown_only_as_http_or_https_with_nothing_hidden_and_no_user(page, server):
    # The server refuses such links; state from an older version or another server still reaches
    # the card, the task page and the widget, which all show a link through safeLink.
    server.post("/api/tasks/tp.links", {"title": "Links", "url": "https://ci.example.com/runs/1"})
    open_task(page, "tp.links")
    assert page.js("return document.querySelector('#hero .task-url').textContent") == "https://ci.example.com/runs/1"
    page.driver.set_script_timeout(10)
    urls = ["https://ci.example.com/runs/1", "https://ci.example.com/\u202etxt.exe", "https://x/a\u0085b",
            "https://ci.example.com@evil.test/", "https://u:p@x/", "javascript:alert(1)", "data:text/html,x"]
    shown = page.driver.execute_async_script(SAFE_LINKS, urls)
    assert shown[0] == {"href": "https://ci.example.com/runs/1", "text": "https://ci.example.com/runs/1"}, shown
    assert shown[1]["text"] == "https://ci.example.com/%E2%80%AEtxt.exe", "the override is shown encoded, not obeyed"
    assert shown[2]["text"] == "https://x/a%C2%85b"
    assert shown[3:] == [None] * 4, shown


def test_the_log_follows_new_lines_and_pauses_when_asked(page, server):
    server.post("/api/tasks/tp.log", {"title": "Logging"})
    server.post("/api/tasks/tp.log/log", {"lines": [f"line {n}" for n in range(200)]})
    open_task(page, "tp.log")
    page.wait(lambda: page.js("return document.getElementById('log').dataset.lines") == "200", 5, "the tail did not load")
    at_bottom = "const l = document.getElementById('log'); return l.scrollTop + l.clientHeight >= l.scrollHeight - 4;"
    assert page.js(at_bottom), "the log starts at its newest line"
    server.post("/api/tasks/tp.log/log", {"lines": ["fresh 1", "fresh 2"]})
    page.wait(lambda: page.js("return document.getElementById('log').textContent.endsWith('fresh 2')"), 5, "no new lines")
    page.wait(lambda: page.js(at_bottom), 2, "the log did not follow the new lines")

    page.driver.find_element(By.ID, "log-follow").click()
    assert page.js("return document.getElementById('log-follow').getAttribute('aria-pressed')") == "false"
    page.js("document.getElementById('log').scrollTop = 0")
    server.post("/api/tasks/tp.log/log", {"lines": ["while paused"]})
    page.wait(lambda: page.js("return document.getElementById('log').textContent.endsWith('while paused')"), 5, "no line")
    assert page.js("return document.getElementById('log').scrollTop") == 0, "a paused log holds still"

    # Search shows only the lines that hold the words.
    box = page.driver.find_element(By.ID, "log-search")
    box.send_keys("fresh")
    page.wait(lambda: page.js("return document.getElementById('log').textContent") == "fresh 1\nfresh 2", 2, "search")
    assert page.js("return document.getElementById('log-count').textContent") == "2 of 103 lines match", "the server keeps the last 100 lines (logLines), and the 3 since"


def test_the_timeline_shows_a_cancel_and_who_asked(page, server):
    server.post("/api/tasks/tp.deploy", {"title": "Deploy", "controls": ["cancel"], "progress": 0.1})
    open_task(page, "tp.deploy")
    cancel = page.driver.find_element(By.CSS_SELECTOR, "#hero button[data-action='cancel']")
    cancel.click()
    assert cancel.text == "Confirm cancel", "a cancel asks once before it is sent"
    assert server.api("GET", "/api/tasks/tp.deploy").get("cancelRequested") is None, "nothing sent before confirming"
    cancel.click()
    page.wait(lambda: page.js("return [...document.querySelectorAll('#timeline li')].map(li => li.textContent).join('|')")
              .find("Cancel requested by local") >= 0, 5, "the timeline does not show the cancel")
    entry = page.js("const li = document.querySelector('#timeline li[data-event=requested]');"
                    "return [li.dataset.by, li.querySelector('time').dateTime];")
    assert entry[0] == "local" and entry[1].endswith("Z"), entry
    server.post("/api/tasks/tp.deploy", {"state": "cancelled"})
    page.wait(lambda: page.js("return document.querySelectorAll('#timeline li').length") == 3, 5, "the answer is not on the timeline")
    assert page.js("return document.querySelector('#timeline li:last-child').dataset.state") == "cancelled"


def test_the_chart_draws_the_kinds_runs_with_the_median(page, server):
    # Three finished runs of the kind tp.build: 0.3 s, 0.6 s and 0.9 s or so.
    for n, seconds in enumerate([0.3, 0.6, 0.9]):
        server.post(f"/api/tasks/tp.build-{n}", {"progress": 0})
        time.sleep(seconds)
        server.post(f"/api/tasks/tp.build-{n}", {"state": "done"})
    kinds = {k["kind"]: k for k in server.api("GET", "/api/kinds")["kinds"]}
    runs = kinds["tp.build"]
    server.post("/api/tasks/tp.build-9", {"title": "Build 9", "progress": 0.1})
    open_task(page, "tp.build-9")
    page.wait(lambda: page.js("return document.querySelectorAll('#runs svg .bar').length") == 3, 5, "no bars")
    bars = page.js("return [...document.querySelectorAll('#runs svg .bar')].map(b => Number(b.dataset.seconds))")
    assert bars == runs["durations"], (bars, runs)
    assert page.js("return Number(document.querySelector('#runs svg line.median').dataset.seconds)") == runs["median"]
    assert page.js("return Number(document.querySelector('#runs svg line.p90').dataset.seconds)") == runs["p90"]
    assert page.js("return !!document.querySelector('#runs svg line.this-run')"), "this run's elapsed time is on the chart"
    # The median line is drawn at the median's height: between the shortest and the longest bar's tops.
    tops = page.js("""const svg = document.querySelector('#runs svg');
        return [Number(svg.querySelector('line.median').getAttribute('y1')),
                ...[...svg.querySelectorAll('.bar')].map(b => Number(b.getAttribute('y')))];""")
    assert min(tops[1:]) <= tops[0] <= max(tops[1:]), tops


def test_a_reload_and_a_shared_link_open_the_same_page_live(page, server, driver):
    server.post("/api/tasks/tp.share", {"title": "Shared", "progress": 0.2})
    server.post("/api/tasks/tp.share.step-1", {"title": "Step one", "parent": "tp.share", "progress": 0.5})
    open_task(page, "tp.share")
    assert page.js("return [...document.querySelectorAll('#steps .step a')].map(a => a.textContent)") == ["Step one"]
    page.driver.refresh()
    open_task(page, "tp.share")
    answer = server.post("/api/tasks/tp.share", {"progress": 0.6})
    page.sync(answer["seq"])
    page.wait(lambda: page.js("return document.querySelector('#hero .ring').getAttribute('aria-valuenow')") == "60", 5,
              "the reloaded page is not live")
    # The link as someone else receives it: a fresh load of the same address.
    page.driver.delete_all_cookies()
    page.driver.get("about:blank")
    page.driver.get(f"{server.base}/tasks/tp.share")
    page.wait(lambda: page.js("return document.querySelector('#hero .ring') && "
                              "document.querySelector('#hero .ring').getAttribute('aria-valuenow')") == "60", 10, "shared link")
    assert page.js("return document.title") == "Shared · Ringcast"
    server.post("/api/tasks/tp.share.step-1", {"state": "done"})
    page.wait(lambda: page.js("return document.querySelector('#steps .step').dataset.state") == "done", 5, "steps not live")


# A publisher on the page's own connection: a WebSocket in publish mode, as `ringcast run` opens.
PUBLISH = """const ws = new WebSocket(arguments[0] + '/ws?mode=publish');
    window.heard = [];
    ws.onmessage = (e) => window.heard.push(JSON.parse(e.data));
    ws.onopen = () => ws.send(JSON.stringify({type: 'update', id: arguments[1], progress: 0.35}));
    window.publisher = ws;"""


def test_a_cancel_no_publisher_has_says_so_to_every_viewer(page, server):
    server.post("/api/tasks/tp.orphan", {"title": "Orphan", "controls": ["cancel"], "progress": 0.3})
    page.open("tp.orphan")
    page.wait(lambda: page.card("tp.orphan") is not None, 5, "no card")
    # Someone else asks (the API, the CLI, another browser); no publisher is connected to hear it.
    answer = server.api("POST", "/api/tasks/tp.orphan/cancel")
    assert answer["delivered"] == 0 and answer["task"]["requestWaiting"] is True, answer
    card_badge = "return document.querySelector('.task[data-id=\"tp.orphan\"] .badge').textContent"
    page.wait(lambda: page.js(card_badge) == "Cancel waiting", 5,
              f"the card says {page.js(card_badge)!r}, as if someone were carrying the cancel out")
    assert page.js(card_badge.replace(".textContent", ".title")) == "Cancel waiting for its publisher", "in full on hover"

    open_task(page, "tp.orphan")
    hero_badge = "return document.querySelector('#hero .badge').textContent"
    page.wait(lambda: page.js(hero_badge) == "Cancel waiting for its publisher", 5, f"the page says {page.js(hero_badge)!r}")
    # The publisher connects and publishes the task: it is sent the cancel, and every viewer sees it taken.
    page.js(PUBLISH, server.ws_base, "tp.orphan")
    page.wait(lambda: page.js(hero_badge) == "Cancelling…", 5, f"the page says {page.js(hero_badge)!r}")
    heard = page.js("return window.heard.filter((m) => m.type === 'control')")
    assert [(m["id"], m["action"]) for m in heard] == [("tp.orphan", "cancel")], heard
    assert "requestWaiting" not in server.api("GET", "/api/tasks/tp.orphan")
    page.js("window.publisher.close()")


def test_a_burst_shows_no_absurd_rate_and_an_instant_failure_says_so(page, server):
    server.post("/api/tasks/tp.burst", {"title": "Burst", "progress": 0})
    for n in range(1, 5):
        server.post("/api/tasks/tp.burst", {"progress": n / 5})  # milliseconds apart
    rate = server.api("GET", "/api/tasks/tp.burst").get("rate")
    assert rate is not None and rate > 1, f"the burst gives the server a rate above the whole task a second: {rate}"
    open_task(page, "tp.burst")
    page.wait(lambda: page.js("return document.querySelector('#hero .ring').getAttribute('aria-valuenow')") == "80", 5, "ring")
    assert page.js("return document.querySelector('#hero .rate').textContent") == "", "no rate like '749 %/s'"
    page.open("tp.burst")
    page.wait(lambda: page.card("tp.burst") is not None, 5, "no card")
    assert page.js("return document.querySelector('.task[data-id=\"tp.burst\"] .rate').textContent") == ""

    server.post("/api/tasks/tp.instant", {"title": "Instant", "state": "failed", "detail": "exit status 1"})
    open_task(page, "tp.instant")
    clock = "return document.querySelector('#hero .clock').textContent"
    page.wait(lambda: page.js(clock).startswith("took "), 5, "no clock")
    assert page.js(clock).startswith("took under a second · "), page.js(clock)
