"""The dashboard for a team, in headless Chromium against the real server: the
search box, the Recent section for finished work, and the rate sparklines."""

import time

from conftest import Page
from harness import make_driver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

FOLD_AFTER_S = 4  # render.js FOLD_AFTER_MS: a task seen finishing stays in place this long


def url_query(page):
    return page.js("return location.search")


def wait_for_query(page, query):
    """Waits until the page has taken every key of `query` (the box writes each edit to the URL as it
    takes it): cards that match the whole query may already show after its first keys."""
    expected = "?watch=q.*&q=" + query.replace(" ", "+")
    page.wait(lambda: url_query(page) == expected, 2, f"the URL does not say q={query}")


def test_search_filters_as_you_type_and_keeps_q_in_the_url(page, server):
    post = server.post
    post("/api/tasks/q.build-1", {"title": "Build linux", "progress": 0.2})
    post("/api/tasks/q.build-2", {"title": "Build macOS", "progress": 0.4})
    post("/api/tasks/q.docs", {"title": "Docs site", "progress": 0.6})
    post("/api/tasks/q.rel", {"title": "Release 2.0"})
    post("/api/tasks/q.rel.pkg", {"title": "Packages", "progress": 0.5, "parent": "q.rel"})
    post("/api/tasks/q.rel.notes", {"title": "Release notes", "progress": 0.1, "parent": "q.rel"})
    everything = {"q.build-1", "q.build-2", "q.docs", "q.rel", "q.rel.pkg", "q.rel.notes"}
    page.open("q.*")
    page.wait(lambda: page.shown_ids() == everything, 3, "not every card shown")
    box = page.driver.find_element(By.ID, "search")
    assert box.get_attribute("aria-keyshortcuts") == "/"

    # "/" focuses the box; each key filters at once (by title here), and the URL follows.
    page.driver.find_element(By.TAG_NAME, "body").send_keys("/")
    assert page.js("return document.activeElement.id") == "search"
    typed = []
    for ch in "buil":
        box.send_keys(ch)
        typed.append(ch)
        page.wait(lambda: f"q={''.join(typed)}" in url_query(page), 2, "the URL does not follow the box")
    page.wait(lambda: page.shown_ids() == {"q.build-1", "q.build-2"}, 2, "'buil' does not filter")
    assert url_query(page) == "?watch=q.*&q=buil", "?watch= must stay as it was"
    page.wait(lambda: page.js("return document.getElementById('search-count').textContent") == "2 of 4", 2,
              "the count does not say 2 of 4")
    # Every word must match, in the id or the title.
    box.send_keys("d mac")
    wait_for_query(page, "build mac")
    page.wait(lambda: page.shown_ids() == {"q.build-2"}, 2, "'build mac' does not filter")
    page.shot(f"{page.name}-typed")

    # A child that matches brings its parent, and only itself; a parent that matches brings all.
    box.clear()
    box.send_keys("packages")
    wait_for_query(page, "packages")
    page.wait(lambda: page.shown_ids() == {"q.rel", "q.rel.pkg"}, 2, "a matching child without its parent")
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys("release 2")
    wait_for_query(page, "release 2")
    page.wait(lambda: page.shown_ids() == {"q.rel", "q.rel.pkg", "q.rel.notes"}, 2, "a parent without its children")
    # By id.
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys("q.docs")
    wait_for_query(page, "q.docs")
    page.wait(lambda: page.shown_ids() == {"q.docs"}, 2, "no match by id")

    # Tasks that arrive while filtered are filtered too.
    post("/api/tasks/q.docs-api", {"title": "API reference", "progress": 0.3})
    seq = post("/api/tasks/q.other", {"title": "Unrelated", "progress": 0.3})["seq"]
    page.sync(seq)
    assert page.shown_ids() == {"q.docs", "q.docs-api"}

    # Nothing matches: the page says so.
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys("zzz")
    # The note for the whole query: after two of the three keys it already says “zz”.
    page.wait(lambda: page.js("const n = document.getElementById('note'); return !n.hidden && n.textContent")
              == "No task matches “zzz”.", 2, "no 'no match' note for zzz")
    assert page.shown_ids() == set()

    # The view can be shared: a reload (or the link) starts filtered, before any card is drawn.
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys("build")
    page.wait(lambda: url_query(page) == "?watch=q.*&q=build", 2, "URL not updated")
    d = page.driver
    spy = d.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": """
        window.__added = new Set();
        new MutationObserver((records) => {
          for (const r of records) for (const n of r.addedNodes)
            if (n.classList && n.classList.contains('task')) __added.add(n.dataset.id);
        }).observe(document, {subtree: true, childList: true});"""})["identifier"]
    try:
        d.refresh()
        page.wait_ready()
        page.wait(lambda: page.shown_ids() == {"q.build-1", "q.build-2"}, 3, "the reload is not filtered")
        assert d.find_element(By.ID, "search").get_attribute("value") == "build"
        assert set(page.js("return [...__added]")) == {"q.build-1", "q.build-2"}, "other cards were drawn first"
    finally:
        d.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", {"identifier": spy})
    page.shot()

    # Escape clears the filter and the URL.
    box = d.find_element(By.ID, "search")
    box.send_keys(Keys.ESCAPE)
    page.wait(lambda: page.shown_ids() == everything | {"q.docs-api", "q.other"}, 2, "Escape does not clear")
    assert url_query(page) == "?watch=q.*"


def test_finished_tasks_fold_into_recent(page, server):
    post = server.post
    post("/api/tasks/rc.run", {"title": "Running", "progress": 0.3})
    post("/api/tasks/rc.paused", {"title": "Paused", "progress": 0.3, "state": "paused"})
    post("/api/tasks/rc.stall", {"title": "Stalled", "progress": 0.2, "staleAfter": 0.5})
    post("/api/tasks/rc.done", {"title": "Done", "progress": 1, "state": "done"})
    post("/api/tasks/rc.failed", {"title": "Failed", "progress": 0.5, "state": "failed"})
    post("/api/tasks/rc.cancel", {"title": "Cancelled", "progress": 0.1, "state": "cancelled"})
    # A finished parent with a running child stays in the grid; so does a running parent with a
    # finished child; a finished family folds together.
    post("/api/tasks/rc.p1", {"title": "Finished parent", "state": "done"})
    post("/api/tasks/rc.p1.kid", {"title": "Still running", "progress": 0.5, "parent": "rc.p1"})
    post("/api/tasks/rc.p2", {"title": "Running parent"})
    post("/api/tasks/rc.p2.kid", {"title": "Finished child", "progress": 1, "state": "done", "parent": "rc.p2"})
    post("/api/tasks/rc.p3", {"title": "Finished family", "state": "done"})
    post("/api/tasks/rc.p3.kid", {"title": "Finished too", "progress": 1, "state": "done", "parent": "rc.p3"})
    page.wait(lambda: server.api("GET", "/api/tasks/rc.stall")["state"] == "stalled", 5, "no stall")

    page.open("rc.*")
    page.wait(lambda: len(page.ids()) == 12, 3, "not every card on the page")
    # A failure stays in the live grid, first, until dismissed; stalled next; then by id.
    assert page.section_ids("live") == ["rc.failed", "rc.stall", "rc.p1", "rc.p2", "rc.paused", "rc.run"]
    assert set(page.section_ids("recent")) == {"rc.done", "rc.cancel", "rc.p3"}
    inside = "return !!document.querySelector(`.task[data-id='${arguments[0]}'] .children .task[data-id='${arguments[1]}']`)"
    for parent in ("rc.p1", "rc.p2", "rc.p3"):
        assert page.js(inside, parent, parent + ".kid"), f"{parent}.kid not inside its parent"

    # Collapsed by default: a disclosure with a count, its cards not displayed.
    recent = page.js("""const r = document.getElementById('recent'), s = r.querySelector('summary');
        return {tag: r.tagName, open: r.open, hidden: r.hidden, summary: s.textContent.replace(/\\s+/g, ' ').trim(),
                focusable: s.tabIndex >= 0};""")
    assert recent == {"tag": "DETAILS", "open": False, "hidden": False, "focusable": True,
                      "summary": "Recent 3 finished"}, recent
    assert page.shown_ids() == {"rc.run", "rc.paused", "rc.stall", "rc.p1", "rc.p1.kid", "rc.p2", "rc.p2.kid", "rc.failed"}
    # Dismissed, the failure folds into Recent.
    page.driver.find_element(By.CSS_SELECTOR, ".task[data-id='rc.failed'] button.dismiss").click()
    page.wait(lambda: "rc.failed" in page.section_ids("recent"), 2, "a dismissed failure does not fold")
    # Opened with the keyboard, closed with a click.
    summary = page.driver.find_element(By.CSS_SELECTOR, "#recent > summary")
    page.js("arguments[0].focus()", summary)
    summary.send_keys(Keys.ENTER)
    page.wait(lambda: page.js("return document.getElementById('recent').open"), 2, "Enter does not open Recent")
    page.wait(lambda: {"rc.done", "rc.failed", "rc.cancel", "rc.p3", "rc.p3.kid"} <= page.shown_ids(), 2,
              "Recent's cards not shown when open")
    page.shot(f"{page.name}-open")
    summary.click()
    page.wait(lambda: not page.js("return document.getElementById('recent').open"), 2, "a click does not close it")

    # A task seen finishing stays in place for a moment, then folds in first (newest first).
    seq = post("/api/tasks/rc.run", {"state": "done"})["seq"]
    finished = time.monotonic()
    page.sync(seq)
    assert "rc.run" in page.section_ids("live"), "folded at once: the person did not see it finish"
    assert page.card_info("rc.run")["state"] == "done"
    page.wait(lambda: page.section_ids("recent")[:1] == ["rc.run"], FOLD_AFTER_S + 4, "rc.run did not fold")
    assert time.monotonic() - finished >= FOLD_AFTER_S - 0.5
    assert page.js("return document.querySelector('#recent .recent-count').textContent") == "5"

    # The last running child finishing lets its finished parent fold, with the child inside.
    post("/api/tasks/rc.p1.kid", {"progress": 1, "state": "done"})
    page.wait(lambda: "rc.p1" in page.section_ids("recent"), FOLD_AFTER_S + 4, "the finished family did not fold")
    assert page.js(inside, "rc.p1", "rc.p1.kid")
    # A finished task that runs again comes back to the grid at once.
    seq = post("/api/tasks/rc.done", {"state": "running", "progress": 0.1})["seq"]
    page.sync(seq)
    assert "rc.done" in page.section_ids("live") and "rc.done" not in page.section_ids("recent")
    page.shot()


def spark_info(page, task_id):
    return page.js("""
        const c = document.querySelector(`.task[data-id='${arguments[0]}']`);
        const s = c && c.querySelector('svg.spark');
        if (!s) return null;
        const line = s.querySelector('.spark-line');
        const d = line.getAttribute('d') || '';
        return {shown: s.checkVisibility(),
                points: (d.match(/[ML]/g) || []).length, d,
                styled: [s, ...s.querySelectorAll('*')].some(e => e.hasAttribute('style')),
                hidden: s.getAttribute('aria-hidden'), inHead: s.parentNode.classList.contains('head')};""", task_id)


def push_progress(server, task_id, seconds, per_second=5, start=0.0, step=0.01):
    """Publishes a steadily moving task for `seconds` (the pacing is the point: the server's
    rate needs time to pass)."""
    n = int(seconds * per_second)
    t0 = time.monotonic()
    for k in range(n):
        delay = t0 + k / per_second - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        server.post(f"/api/tasks/{task_id}", {"progress": round(min(0.99, start + k * step), 4)})
    return start + n * step


def test_running_cards_have_a_rate_sparkline(page, server):
    server.post("/api/tasks/sp.fast", {"title": "Sparkline", "progress": 0})
    page.open("sp.*")
    page.wait(lambda: page.card_info("sp.fast"), 2, "no card")
    # Record each redraw of the line.
    page.js("""window.__draws = [];
        new MutationObserver((rs) => { for (const r of rs) if (r.target.classList.contains('spark-line')) __draws.push(performance.now()); })
          .observe(document.getElementById('tasks'), {subtree: true, attributes: true, attributeFilter: ['d']});""")
    # Two-second slots: after a little over two slots of updates there are at least two samples.
    at = push_progress(server, "sp.fast", 4.5)
    info = page.wait(lambda: (spark_info(page, "sp.fast") or {}).get("shown") and spark_info(page, "sp.fast"), 3,
                     "no sparkline on a running card")
    assert info["points"] >= 2 and info["inHead"], info
    assert info["hidden"] == "true" and not info["styled"], "a sparkline must need no inline style (CSP)"
    first = len(page.js("return __draws"))
    # While updates come 5 times a second, the line is redrawn about once a second, not per update.
    push_progress(server, "sp.fast", 3, start=at)
    page.wait(lambda: len(page.js("return __draws")) > first, 3, "the sparkline is not redrawn")
    draws = page.js("return __draws")
    gaps = [round((b - a) / 1000, 2) for a, b in zip(draws, draws[1:])]
    assert 1 <= len(draws) - first <= 5 and all(g >= 0.95 for g in gaps), f"redraws {gaps} s apart"
    page.shot()
    # A finished card has no sparkline (and its history is dropped).
    seq = server.post("/api/tasks/sp.fast", {"state": "done"})["seq"]
    page.sync(seq)
    assert not spark_info(page, "sp.fast")["shown"]
    # Memory per task is bounded: the history is a ring of SLOTS samples however many arrive.
    ring = page.driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        import('/js/spark.js').then((m) => {
          const h = new m.RateHistory();
          for (let k = 0; k < 20000; k++) h.record('x', k, k * 250);  // 8 samples a slot, 2 500 slots
          const r = h.rings.get('x'), s = h.samples('x');
          done({slots: m.SLOTS, length: r.values.length, samples: s.length, last: s[s.length - 1],
                first: s[0], gap: (h.record('x', 1, 20000 * 250 + 3 * m.SLOT_MS), h.samples('x').slice(-5))});
        }, (e) => done(String(e)));""")
    assert ring["length"] == ring["slots"] == ring["samples"] == 90, ring
    # The newest slot holds the last sample; the oldest of the 90 slots, 89 slots (8 samples each) before.
    assert ring["last"] == 19999 and ring["first"] == 19999 - 8 * 89, ring
    # Slots that passed without a sample are gaps (NaN, which comes back as null).
    assert ring["gap"] == [19999, None, None, None, 1], ring


def test_sparklines_redraw_rarely_under_reduced_motion(server):
    server.post("/api/tasks/sprm.slow", {"title": "Calm", "progress": 0})
    d = make_driver(reduced_motion=True)
    try:
        d.get(server.base + "/?watch=sprm.*")
        page = Page(d, server, "test_sparklines_redraw_rarely_under_reduced_motion")
        page.wait_ready()
        page.js("""window.__draws = [];
            new MutationObserver((rs) => { for (const r of rs) if (r.target.classList.contains('spark-line')) __draws.push(performance.now()); })
              .observe(document.getElementById('tasks'), {subtree: true, attributes: true, attributeFilter: ['d']});""")
        push_progress(server, "sprm.slow", 8)
        page.wait(lambda: (spark_info(page, "sprm.slow") or {}).get("shown"), 3, "no sparkline")
        draws = page.js("return __draws")
        gaps = [round((b - a) / 1000, 2) for a, b in zip(draws, draws[1:])]
        # 8 s of updates five times a second: drawn, then redrawn at most every 5 s (not every second).
        assert 1 <= len(draws) <= 2 and all(g >= 4.9 for g in gaps), f"redraws {gaps} s apart"
        assert page.js("return getComputedStyle(document.querySelector('.spark-line')).transitionDuration") == "0s"
        assert not [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
    finally:
        d.quit()


def test_many_cards_keep_order_in_full_chunks_and_off_screen_cards_catch_up(page, server):
    """The layout behind 5 000 cards (js/sections.js): chunks of 60 the browser may skip, every
    chunk but the last full, cards in order; off-screen cards brought up to date all the same."""
    ids = [f"many.{n:03d}" for n in range(130)]
    server.post("/api/events", [{"type": "update", "id": i, "title": f"Task {i}", "progress": 0.1} for i in ids])
    page.open("many.*")
    page.wait(lambda: len(page.section_ids("live")) == 130, 5, "not every card on the page")
    chunks = "return [...document.querySelectorAll(`.chunk[data-section='live']`)].map(c => c.childElementCount)"
    assert page.js(chunks) == [60, 60, 10]
    order = page.section_ids("live")
    assert sorted(order) == ids
    # The browser skips what is far off screen (content-visibility: auto on the chunk).
    page.wait(lambda: page.js("return document.querySelector(`.chunk[data-section='live']:last-child > .task`)"
                              ".checkVisibility({contentVisibilityAuto: true}) === false"), 2,
              "the last chunk is not skipped")

    # Removing cards from the first chunk pulls the next ones up: no gaps, same order.
    gone = set(order[3:8])
    for i in gone:
        server.api("DELETE", f"/api/tasks/{i}")
    page.wait(lambda: page.js(chunks) == [60, 60, 5], 3, "chunks not refilled")
    assert page.section_ids("live") == [i for i in order if i not in gone]

    # Every card reaches the last value, those off screen too (in idle time).
    seq = server.post("/api/events", [{"type": "update", "id": i, "progress": 0.77}
                                      for i in ids if i not in gone])["seq"]
    page.sync(seq)
    page.wait(lambda: page.js("""return [...document.querySelectorAll('.task [role=progressbar]')]
        .every(r => r.getAttribute('aria-valuenow') === '77')"""), 5, "off-screen cards not brought up to date")
    # Scrolled to the bottom, the last card is drawn and current.
    page.js("document.querySelector(`.task[data-id='many.129']`).scrollIntoView()")
    page.wait(lambda: page.card_info("many.129")["valuenow"] == "77", 2, "the last card is not current")
    page.shot()
