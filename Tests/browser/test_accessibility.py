"""axe-core (through axe-selenium-python) on every screen, in both themes: the dashboard, a task's
page, the modal overlay, the embeddable widget and the sign-in form. No violation of impact
"serious" or "critical" is allowed; the others are written to
Tests/browser/screenshots/axe-report.json, for the record."""

import json

import pytest
from axe_selenium_python import Axe
from harness import SCREENSHOTS, Server
from selenium.webdriver.support.wait import WebDriverWait

THEMES = ["light", "dark"]
REPORT = {}


SETTLED = """const all = [document, ...[...document.querySelectorAll('ringcast-task')].map((w) => w.shadowRoot).filter(Boolean)];
    return all.every((root) => root.getAnimations().every((a) => a.playState !== 'running'
      || a.effect.getComputedTiming().iterations === Infinity));"""


def check(driver, screen, theme, context=None):
    # Colours are read once entry animations are over (a card fading in is not its colour).
    WebDriverWait(driver, 5).until(lambda d: d.execute_script(SETTLED))
    axe = Axe(driver)
    axe.inject()
    results = axe.run(context=context, options='{"resultTypes": ["violations"]}')
    violations = results["violations"]
    grave = [(v["id"], v["impact"], [n["target"] for n in v["nodes"]][:5], v["nodes"][0].get("failureSummary", ""))
             for v in violations if v["impact"] in ("serious", "critical")]
    REPORT[f"{screen}/{theme}"] = [(v["id"], v["impact"], len(v["nodes"])) for v in violations]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    (SCREENSHOTS / "axe-report.json").write_text(json.dumps(REPORT, indent=1, sort_keys=True))
    assert not grave, f"{screen} in the {theme} theme: {grave}"


def use_theme(page, theme):
    """The reader's pick, as the toggle keeps it; then the page is loaded again."""
    page.js("localStorage.setItem('ringcast-theme', arguments[0])", theme)


@pytest.fixture(autouse=True)
def forget_theme(driver, server):
    """The browser is shared by every test: the theme picked here must not stay for the others."""
    yield
    for origin in (server.base,):
        driver.get(origin + "/favicon.svg")
        driver.execute_script("localStorage.removeItem('ringcast-theme')")


@pytest.fixture(scope="module")
def tasks(server):
    post = server.post
    post("/api/tasks/a11y.build-1", {"title": "Build", "detail": "compiling", "progress": 0.42, "controls": ["cancel", "pause"],
                                     "url": "https://ci.example.com/runs/1"})
    post("/api/tasks/a11y.build-1/log", {"lines": ["compiling a.c", "compiling b.c"]})
    post("/api/tasks/a11y.build-1.step", {"title": "Step", "parent": "a11y.build-1", "progress": 0.5})
    post("/api/tasks/a11y.failed", {"title": "Failed job", "detail": "exit 1", "progress": 0.7, "state": "failed"})
    post("/api/tasks/a11y.paused", {"title": "Paused job", "progress": 0.3, "state": "paused"})
    post("/api/tasks/a11y.done", {"title": "Done job", "progress": 1, "state": "done"})
    post("/api/tasks/a11y.spin", {"title": "Waiting", "progress": None})
    post("/api/timers/a11y.tea", {"seconds": 300, "title": "Tea"})
    return server


@pytest.mark.parametrize("theme", THEMES)
def test_the_dashboard(page, tasks, theme):
    page.open("a11y.*")
    use_theme(page, theme)
    page.open("a11y.*")
    assert page.js("return document.documentElement.dataset.theme") == theme
    page.wait(lambda: len(page.ids()) >= 7, 3, "cards")
    page.js("document.getElementById('recent').open = true")
    check(page.driver, "dashboard", theme)


@pytest.mark.parametrize("theme", THEMES)
def test_a_task_page(page, tasks, theme):
    page.open("a11y.*")
    use_theme(page, theme)
    page.driver.get(f"{tasks.base}/tasks/a11y.build-1")
    page.wait(lambda: page.js("return document.getElementById('status').dataset.state") == "live", 10, "live")
    page.wait(lambda: page.js("return document.querySelectorAll('#timeline li').length") > 0, 5, "timeline")
    check(page.driver, "task page", theme)


@pytest.mark.parametrize("theme", THEMES)
def test_a_cancel_pending_on_the_dashboard_and_the_task_page(page, tasks, theme):
    # A cancel asked over the API that no publisher has received yet; a task for each theme, as
    # the publisher below takes the request.
    task_id = f"a11y.cancelling-{theme}"
    tasks.post(f"/api/tasks/{task_id}", {"title": "Copy", "detail": "copying", "progress": 0.4, "controls": ["cancel"]})
    tasks.post(f"/api/tasks/{task_id}/cancel")
    page.open("a11y.*")
    use_theme(page, theme)
    page.open("a11y.*")
    card = f"return document.querySelector('.task[data-id=\"{task_id}\"] .badge').textContent"
    page.wait(lambda: page.js(card) == "Cancel waiting", 5, "the card's badge")
    check(page.driver, "dashboard with a cancel pending", theme)
    page.driver.get(f"{tasks.base}/tasks/{task_id}")
    page.wait(lambda: page.js("return document.getElementById('status').dataset.state") == "live", 10, "live")
    badge = "return document.querySelector('#hero .badge').textContent"
    page.wait(lambda: page.js(badge) == "Cancel waiting for its publisher", 5, "the page's badge")
    check(page.driver, "task page with a cancel waiting", theme)
    # A publisher takes it: "Cancelling…", the badge axe found at 4.09:1 on the light page.
    page.js("""const ws = new WebSocket(arguments[0] + '/ws?mode=publish'); window.publisher = ws;
        ws.onopen = () => ws.send(JSON.stringify({type: 'update', id: arguments[1], progress: 0.4}));""", tasks.ws_base, task_id)
    page.wait(lambda: page.js(badge) == "Cancelling…", 5, "the page's badge once a publisher has it")
    check(page.driver, "task page with a cancel pending", theme)
    page.js("window.publisher.close()")


@pytest.mark.parametrize("theme", THEMES)
def test_the_modal_overlay(page, tasks, theme):
    page.open("a11y.*")
    use_theme(page, theme)
    page.open("a11y.*")
    tasks.post("/api/tasks/a11y.modal", {"title": "Saving", "detail": "please wait", "progress": None, "visible": False})
    tasks.post("/api/tasks/a11y.modal/show", {"modal": True})
    try:
        page.wait(lambda: page.js("return !document.getElementById('modal-overlay').hidden"), 3, "overlay")
        check(page.driver, "modal", theme)
    finally:
        tasks.post("/api/tasks/a11y.modal/hide")


@pytest.mark.parametrize("theme", THEMES)
def test_the_widget(page, tasks, site, theme):
    url = site.partner_page(f"a11y-widget-{theme}.html", tasks, f"""<main><h1>Partner</h1>
  <ringcast-task server="{tasks.ws_base}" task="a11y.build-1" theme="{theme}"></ringcast-task>
  <ringcast-task server="{tasks.ws_base}" task="a11y.failed" theme="{theme}"></ringcast-task></main>""")
    page.driver.get(url)
    page.wait(lambda: page.js("""return [...document.querySelectorAll('ringcast-task')].every((w) =>
        w.shadowRoot && w.shadowRoot.querySelector('.card').dataset.state !== 'none')"""), 10, "the widgets")
    check(page.driver, "widget", theme, context={"include": [["ringcast-task"]]})


@pytest.fixture(scope="module")
def closed(site):
    """A server that shows nothing without a token, loopback included: the sign-in form."""
    s = Server(allowed_origins=[site.origin], settings={"anonymousRead": False})
    s.start()
    yield s
    s.stop()


@pytest.mark.parametrize("theme", THEMES)
def test_the_sign_in_form(page, closed, theme, driver):
    page.driver.get(closed.base + "/")
    use_theme(page, theme)
    page.driver.get(closed.base + "/")
    page.wait(lambda: page.js("return !document.getElementById('signin').hidden"), 10, "the form")
    page.allowed_console.append("401")
    try:
        check(page.driver, "sign-in", theme)
    finally:
        driver.execute_script("localStorage.removeItem('ringcast-theme')")
