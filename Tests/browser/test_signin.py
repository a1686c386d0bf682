"""Sign-in in Chromium: a dashboard the server refuses shows the form; a `/#token=` link fills it in
and asks (never signs in, or replaces a session, unasked);
the token then lives in an HttpOnly, SameSite=Strict cookie and in no URL the browser requests
(WebSockets included); Cancel appears only on the task the token may publish; Sign out clears the
cookie; a token that expires while the page watches brings the form back. Tokens are minted by
PyJWT, not by the server's code."""

import json
import time
import urllib.request

import jwt
import pytest
from harness import Server, make_driver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.wait import WebDriverWait

SECRET = "browser-signing-key-0123456789abcdef0123"


def mint(read, publish, seconds=600, sub="alice"):
    return jwt.encode({"sub": sub, "exp": int(time.time()) + seconds, "ringcast": {"read": read, "publish": publish}},
                      SECRET, algorithm="HS256")


@pytest.fixture(scope="module")
def guarded(site):
    """A server that shows nothing without a token, loopback included; tasks published from loopback."""
    s = Server(allowed_origins=[site.origin], settings={"anonymousRead": False, "tokenSecretEnv": "RINGCAST_TEST_TOKEN_SECRET"},
               env={"RINGCAST_TEST_TOKEN_SECRET": SECRET})
    s.start()
    for task, title in (("ci.job", "CI job"), ("deploy.job", "Deploy job")):
        s.post(f"/api/tasks/{task}", {"title": title, "progress": 0.3, "controls": ["cancel", "pause"]})
    yield s
    s.stop()


@pytest.fixture(scope="module")
def browser():
    d = make_driver(network_log=True)
    yield d
    d.quit()


def wait(driver, cond, timeout=10, message="condition not met"):
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.05).until(lambda _d: cond())
    except Exception:
        raise AssertionError(f"{message} within {timeout} s") from None


def form_shown(driver):
    return driver.execute_script("const f = document.getElementById('signin'); return f && !f.hidden;")


def reason(driver):
    return driver.execute_script("return document.getElementById('signin-reason').textContent")


def card_ids(driver):
    return set(driver.execute_script("return [...document.querySelectorAll('.task:not(.leaving)')].map(c => c.dataset.id)"))


def buttons(driver, task_id):
    return driver.execute_script(
        "const c = document.querySelector(`.task[data-id='${arguments[0]}']`);"
        "return c ? [...c.querySelectorAll('button.action')].map(b => b.dataset.action) : null;", task_id)


def live(driver):
    return driver.execute_script("return document.getElementById('status').dataset.state === 'live'")


def requested_urls(driver):
    """Every URL the browser asked for since the last call: HTTP requests and WebSocket handshakes."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
        elif message["method"] == "Network.webSocketCreated":
            urls.append(message["params"]["url"])
    return urls


def server_task(server, task_id, token):
    req = urllib.request.Request(f"{server.base}/api/tasks/{task_id}", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def test_a_sign_in_link_signs_in_with_an_http_only_cookie_and_cancel_shows_only_where_it_may_publish(guarded, browser):
    d = browser
    d.delete_all_cookies()
    d.get(guarded.base + "/")
    # Refused: the form, with the server's reason; no card.
    wait(d, lambda: form_shown(d), message="the sign-in form")
    assert "without a token" in reason(d), reason(d)
    assert card_ids(d) == set()

    token = mint(read=["*"], publish=["ci.*"])
    requested_urls(d)  # from here on, every URL is checked
    d.get(f"{guarded.base}/#token={token}")
    # The link's token is offered, not traded: the form comes up filled in, asking.
    wait(d, lambda: "A link offers a token" in reason(d), message="the form offering the link's token")
    assert d.execute_script("return document.getElementById('signin-token').value") == token
    assert "ringcast_token" not in {c["name"] for c in d.get_cookies()}, "no cookie before the visitor agrees"
    assert d.execute_script("return location.hash") == ""
    d.find_element(By.CSS_SELECTOR, "#signin button[type=submit]").click()
    wait(d, lambda: live(d) and {"ci.job", "deploy.job"} <= card_ids(d), message="the dashboard live after the link")
    assert not form_shown(d)
    assert d.execute_script("return location.hash") == "", "the token is taken out of the address bar"
    assert d.execute_script("return document.getElementById('signed-in-as').textContent") == "alice"

    # The token is in an HttpOnly, SameSite=Strict cookie, which the page's scripts cannot read...
    cookies = {c["name"]: c for c in d.get_cookies()}
    assert cookies["ringcast_token"]["value"] == token
    assert cookies["ringcast_token"]["httpOnly"] is True
    assert cookies["ringcast_token"]["sameSite"] == "Strict"
    assert token not in d.execute_script("return document.cookie")
    # ...and in no URL the browser requested: pages, modules, API calls and the WebSocket.
    urls = requested_urls(d)
    assert any("/ws?" in u for u in urls) and any("/api/session" in u for u in urls), urls
    assert not [u for u in urls if token in u], urls

    # Cancel and Pause only where the token may publish.
    wait(d, lambda: buttons(d, "ci.job") == ["pause", "cancel"], message="ci.job's buttons")
    assert buttons(d, "deploy.job") == []
    cancel = d.find_element(By.CSS_SELECTOR, ".task[data-id='ci.job'] button.action-cancel")
    cancel.click()
    cancel.click()  # Cancel asks once: the second click confirms
    wait(d, lambda: server_task(guarded, "ci.job", token).get("cancelRequested") is True, message="the cancel request")
    assert server_task(guarded, "ci.job", token)["by"] == "alice", "the request records who made it"
    assert not [u for u in requested_urls(d) if token in u]

    # A second link while signed in says whose session it would replace, and replaces nothing unasked.
    other = mint(read=["deploy.*"], publish=[], sub="mallory")
    d.get(f"{guarded.base}/#token={other}")
    wait(d, lambda: "replaces your session as alice" in reason(d), message="the offer naming the session it replaces")
    assert {c["name"]: c for c in d.get_cookies()}["ringcast_token"]["value"] == token, "still alice's cookie"

    # Sign out: the cookie is gone and the dashboard is refused again.
    d.get(guarded.base + "/")
    wait(d, lambda: live(d), message="alice's dashboard again")
    d.find_element(By.ID, "signout").click()
    wait(d, lambda: form_shown(d), message="the form after signing out")
    assert "ringcast_token" not in {c["name"] for c in d.get_cookies()}
    assert card_ids(d) == set()


def test_a_pasted_token_signs_in_and_one_that_expires_brings_the_form_back(guarded, browser):
    d = browser
    d.delete_all_cookies()
    d.get(guarded.base + "/")
    wait(d, lambda: form_shown(d), message="the sign-in form")
    field = d.find_element(By.ID, "signin-token")
    field.send_keys("not-a-token-at-all-0123456789")
    d.find_element(By.CSS_SELECTOR, "#signin button[type=submit]").click()
    wait(d, lambda: "matches no publisher or reader" in reason(d), message="the refusal's reason")
    assert "ringcast_token" not in {c["name"] for c in d.get_cookies()}

    # A reader's grant for eight seconds: the cards show, without buttons (it publishes nothing)...
    brief = mint(read=["ci.*"], publish=[], seconds=8, sub="visitor")
    field.clear()
    field.send_keys(brief)
    d.find_element(By.CSS_SELECTOR, "#signin button[type=submit]").click()
    wait(d, lambda: live(d) and card_ids(d) == {"ci.job"}, message="signed in, ci.* only")
    assert buttons(d, "ci.job") == []
    # ...until it expires: the server closes the socket (4440) and the page asks again.
    wait(d, lambda: form_shown(d), timeout=15, message="the form once the token expired")
    assert "expired" in reason(d), reason(d)
    # Signing in again works with the expired cookie still in the browser.
    field = d.find_element(By.ID, "signin-token")
    field.send_keys(mint(read=["*"], publish=[], sub="visitor"))
    d.find_element(By.CSS_SELECTOR, "#signin button[type=submit]").click()
    wait(d, lambda: live(d) and card_ids(d) == {"ci.job", "deploy.job"}, message="signed in again")


def test_the_widget_on_another_site_reads_with_its_token_attribute_sent_in_no_url(guarded, browser, site):
    d = browser
    token = mint(read=["ci.*"], publish=[], sub="partner-page")
    requested_urls(d)
    d.get(site.partner_page("widget-token.html", guarded,
                            f'<ringcast-task server="{guarded.ws_base}" task="ci.job" token="{token}"></ringcast-task>'))
    title = ("const w = document.querySelector('ringcast-task');"
             "const t = w && w.shadowRoot && w.shadowRoot.querySelector('.title'); return t ? t.textContent : '';")
    wait(d, lambda: d.execute_script(title) == "CI job", message="the widget's task")
    urls = requested_urls(d)
    assert any("/ws?watch=ci.job" in u for u in urls), urls
    assert not [u for u in urls if token in u], "the token goes in the auth message, not the socket's URL"
    d.get("about:blank")
