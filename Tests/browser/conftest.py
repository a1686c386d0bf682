"""Fixtures for the browser tests: the real ringcast server (RINGCAST_BIN, default
.build/release/ringcast) on an ephemeral port, another origin for the widget, one headless
Chromium, and a per-test check that the browser console holds no errors."""

import re

import pytest
from harness import SCREENSHOTS, Server, StaticSite, make_driver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.support.wait import WebDriverWait


@pytest.fixture(scope="session")
def site():
    s = StaticSite()
    yield s
    s.close()


@pytest.fixture(scope="session")
def server(site):
    s = Server(allowed_origins=[site.origin], heartbeat=2)
    s.start()
    yield s
    s.stop()


@pytest.fixture(scope="session")
def driver():
    d = make_driver()
    yield d
    d.quit()


class Page:
    """The dashboard in the browser, with the waits and look-ups the tests share."""

    def __init__(self, driver, server, name):
        self.driver = driver
        self.server = server
        self.name = name
        self.allowed_console = []  # regexes of SEVERE console messages this test expects

    def open(self, watch=None, wait_ready=True, q=None):
        params = [f"watch={watch}"] if watch else []
        if q is not None:
            params.append(f"q={q}")
        self.driver.get(self.server.base + "/" + ("?" + "&".join(params) if params else ""))
        if wait_ready:
            self.wait_ready()

    def wait_ready(self, timeout=10):
        self.wait(lambda: self.js(
            "const s = document.getElementById('splash');"
            "return (!s || s.hidden) && document.getElementById('status').dataset.state === 'live';"),
            timeout, "the dashboard did not become live")

    def js(self, script, *args):
        return self.driver.execute_script(script, *args)

    def wait(self, cond, timeout=5.0, message="condition not met", poll=0.02):
        """Waits until `cond()` is truthy and returns its value; fails with `message` (and a
        screenshot) after `timeout` s."""
        seen = {}

        def check(_driver):
            seen["last"] = cond()
            return seen["last"]

        try:
            return WebDriverWait(self.driver, timeout, poll_frequency=poll).until(check)
        except TimeoutException:
            self.shot(f"{self.name}-timeout")
            raise AssertionError(f"{message} within {timeout} s (last value {seen.get('last')!r})") from None

    def sync(self, seq):
        """Returns once the page has rendered every event up to `seq` (the `seq` of an API answer
        about a task this page watches): the page writes the last seq it rendered to <body>."""
        self.wait(lambda: int(self.js("return document.body.dataset.seq || 0")) >= seq, 5,
                  f"the page did not reach seq {seq}")

    def card(self, task_id):
        from selenium.webdriver.common.by import By
        found = self.driver.find_elements(By.CSS_SELECTOR, f'.task[data-id="{task_id}"]')
        return found[0] if found else None

    def card_info(self, task_id):
        """State of a card as the page shows it, read in one round trip."""
        return self.js("""
            const c = document.querySelector(`.task[data-id="${arguments[0]}"]`);
            if (!c) return null;
            const r = c.querySelector('[role=progressbar]');
            const rem = c.querySelector('.remaining');
            return {
              state: c.dataset.state,
              leaving: c.classList.contains('leaving'),
              valuenow: r && r.getAttribute('aria-valuenow'),
              valuetext: r && r.getAttribute('aria-valuetext'),
              busy: r && r.getAttribute('aria-busy'),
              spinner: !!c.querySelector('.spinner'),
              remaining: rem && rem.textContent,
              title: c.querySelector('.title').textContent,
              detail: c.querySelector('.detail').textContent,
              displayed: c.getClientRects().length > 0,
            };""", task_id)

    def ids(self):
        """Ids of the cards on the page that are not on their way out."""
        return set(self.js(
            "return [...document.querySelectorAll('.task:not(.leaving)')].map(c => c.dataset.id)"))

    def shown_ids(self):
        """Ids of the cards a person sees (not leaving; displayed, and not inside a closed
        <details>, which checkVisibility() knows; a card scrolled out of view counts as seen)."""
        return set(self.js(
            "return [...document.querySelectorAll('.task:not(.leaving)')]"
            ".filter(c => c.checkVisibility()).map(c => c.dataset.id)"))

    def section_ids(self, section):
        """Ids of the top-level cards in a section ('live' or 'recent'), in display order."""
        return self.js(
            "return [...document.querySelectorAll(`.chunk[data-section='${arguments[0]}'] > .task`)]"
            ".map(c => c.dataset.id)", section)

    def status(self):
        return self.js("const s = document.getElementById('status');"
                       "return {state: s.dataset.state, text: s.textContent.trim()};")

    def shot(self, name=None):
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name or self.name}.png"
        self.driver.save_screenshot(str(path))
        return path


@pytest.fixture
def page(request, driver, server):
    driver.get("about:blank")
    driver.get_log("browser")  # start this test with an empty console
    p = Page(driver, server, request.node.name)
    yield p
    entries = driver.get_log("browser")
    severe = [e["message"] for e in entries if e["level"] == "SEVERE"
              and not any(re.search(rx, e["message"]) for rx in p.allowed_console)]
    assert not severe, "browser console errors:\n" + "\n".join(severe)
