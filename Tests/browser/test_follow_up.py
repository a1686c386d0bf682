"""Closing the loop in headless Chromium against the real server: the
Cancel button ending a real `ringcast run`, the log box of an expanded card following new lines,
and stalled and abandoned steps showing on their parent."""

import subprocess

from selenium.webdriver.common.by import By

# Records every text the card's badge shows, so a state held for a moment is seen however the
# test polls.
WATCH_BADGE = """
  window.__badges = [];
  new MutationObserver(() => {
    const b = document.querySelector(`.task[data-id="${arguments[0]}"] .badge`);
    const t = b && !b.hidden ? b.textContent : '';
    if (window.__badges[window.__badges.length - 1] !== t) window.__badges.push(t);
  }).observe(document.getElementById('dashboard'), {subtree: true, childList: true, characterData: true, attributes: true});
"""


def test_the_cancel_button_ends_a_real_ringcast_run(page, server):
    # The command ignores SIGTERM, so run sends SIGKILL after its 2 s grace: "Cancelling…" lasts that long.
    run = subprocess.Popen(
        [str(server.binary), "run", "ui.copy", "--title", "Copy files", "--grace", "2", "--server", server.base,
         "--", "sh", "-c", "trap '' TERM; echo started copying; exec sleep 60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        page.open("ui.*")
        page.wait(lambda: page.js("""const c = document.querySelector('.task[data-id="ui.copy"] button[data-action="cancel"]');
            return !!c && c.getClientRects().length > 0;"""), 10, "no Cancel button on the card")
        buttons = page.js("""return [...document.querySelectorAll('.task[data-id="ui.copy"] .actions button')]
            .map(b => [b.dataset.action, b.textContent, b.getAttribute('aria-label')]);""")
        assert buttons == [["pause", "Pause", "Pause Copy files"], ["cancel", "Cancel", "Cancel Copy files"]], buttons
        # Expanded, the card shows the command's output.
        page.card("ui.copy").click()
        page.wait(lambda: "started copying" in (page.js(
            "const l = document.querySelector('.task[data-id=\"ui.copy\"] .log'); return l && !l.hidden && l.textContent") or ""),
            10, "the log box does not show the command's line")
        page.js(WATCH_BADGE, "ui.copy")
        cancel = page.driver.find_element(By.CSS_SELECTOR, '.task[data-id="ui.copy"] button[data-action="cancel"]')
        cancel.click()
        cancel.click()  # Cancel asks once: the second click confirms
        page.wait(lambda: page.js("return document.querySelector('.task[data-id=\"ui.copy\"]').dataset.request") == "cancel",
                  5, "the card does not say the request is waiting")
        page.shot(f"{page.name}-cancelling")
        assert page.js("return document.querySelector('.task[data-id=\"ui.copy\"] .actions').hidden"), \
            "no more buttons while the request waits"
        assert run.wait(timeout=30) == 130, run.stderr.read()
        page.wait(lambda: (page.card_info("ui.copy") or {}).get("state") == "cancelled", 10, "the card never turned cancelled")
        badges = page.js("return window.__badges")
        assert "Cancelling…" in badges and badges[-1] == "Cancelled", badges
        assert page.js("return document.querySelector('.task[data-id=\"ui.copy\"]').dataset.expanded") == "true", \
            "clicking the button did not fold the card"
        task = server.api("GET", "/api/tasks/ui.copy")
        assert task["state"] == "cancelled" and task["detail"] == "cancelled on request", task
        page.shot()
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()


def test_the_log_box_shows_the_tail_and_follows_new_lines(page, server):
    server.post("/api/tasks/tail.build", {"title": "Build", "progress": 0.3})
    server.post("/api/tasks/tail.build/log", {"lines": [f"compiling file{i}.c" for i in range(1, 41)]})
    page.open("tail.*")
    def info():
        return page.js("""const l = document.querySelector('.task[data-id="tail.build"] .log');
        return l && {hidden: l.hidden, text: l.textContent, atBottom: l.scrollTop + l.clientHeight >= l.scrollHeight - 4,
                     scrolls: l.scrollHeight > l.clientHeight, font: getComputedStyle(l).fontFamily};""")
    assert info()["hidden"], "folded, the card shows no log"
    page.card("tail.build").click()
    page.wait(lambda: "compiling file40.c" in (info() or {}).get("text", ""), 5, "the tail is not shown")
    box = info()
    assert box["text"].splitlines()[0] == "compiling file1.c"
    assert box["scrolls"] and box["atBottom"], box
    assert "mono" in box["font"].lower(), box["font"]
    # New lines are appended and followed.
    answer = server.post("/api/tasks/tail.build/log", {"lines": ["linking", "done linking"]})
    page.sync(answer["seq"])
    page.wait(lambda: info()["text"].endswith("linking\ndone linking"), 5, "new lines are not appended")
    assert info()["atBottom"], "the box does not follow new lines"
    # Scrolled up to read, it holds still.
    page.js("document.querySelector('.task[data-id=\"tail.build\"] .log').scrollTop = 0")
    answer = server.post("/api/tasks/tail.build/log", {"lines": ["another"]})
    page.sync(answer["seq"])
    page.wait(lambda: info()["text"].endswith("another"), 5, "the line is not appended")
    assert page.js("return document.querySelector('.task[data-id=\"tail.build\"] .log').scrollTop") == 0
    page.shot()
    # A click in the box leaves the card open (to select text); on the title it folds, and the lines go.
    page.driver.find_element(By.CSS_SELECTOR, '.task[data-id="tail.build"] .log').click()
    assert page.js("return document.querySelector('.task[data-id=\"tail.build\"]').dataset.expanded") == "true"
    page.driver.find_element(By.CSS_SELECTOR, '.task[data-id="tail.build"] .title').click()
    assert info()["hidden"] and info()["text"] == ""


def test_stalled_and_abandoned_steps_show_on_their_parent(page, server):
    server.post("/api/tasks/fam", {"title": "Release"})
    server.post("/api/tasks/fam.a", {"title": "Build", "parent": "fam", "progress": 1, "state": "done"})
    server.post("/api/tasks/fam.b", {"title": "Upload", "parent": "fam", "progress": 0.4, "staleAfter": 0.3})
    server.post("/api/tasks/fam.c", {"title": "Notify", "parent": "fam", "progress": 0.2, "staleAfter": 0.3, "abandonAfter": 0.3})
    page.open("fam*")
    def kids():
        return page.js("const k = document.querySelector('.task[data-id=\"fam\"] > .task-main .kids'); return k && k.textContent")
    page.wait(lambda: kids() == "1 of 3 steps done, 1 failed (1 abandoned), 1 stalled", 10,
              "the parent does not show its stalled and abandoned steps")
    assert page.card_info("fam.b")["state"] == "stalled"
    assert page.card_info("fam.c")["state"] == "failed"
    assert page.card_info("fam.c")["detail"].startswith("abandoned: no update for ")
    page.shot()
