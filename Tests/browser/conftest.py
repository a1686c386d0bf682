"""Fixtures for the browser tests: the real ringcast server (RINGCAST_BIN, default
.build/release/ringcast) on an ephemeral port, another origin for the widget, one headless
Chromium, and a per-test check that the browser console holds no errors."""

import re
import time

import pytest

from harness import SCREENSHOTS, Server, StaticSite, make_driver


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

    def open(self, watch=None, wait_ready=True):
        url = self.server.base + "/" + (f"?watch={watch}" if watch else "")
        self.driver.get(url)
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
        deadline = time.monotonic() + timeout
        last = None
        while True:
            last = cond()
            if last:
                return last
            if time.monotonic() > deadline:
                self.shot(f"{self.name}-timeout")
                raise AssertionError(f"{message} within {timeout} s (last value {last!r})")
            time.sleep(poll)

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
