"""Sign-in through an identity provider and the provider's tokens, against a real OpenID Connect
provider (Tests/oidc/provider.py, on authlib) and the real server: a person signs in in Chromium
with a password and sees exactly their group's tasks; each kind of bad token is refused with its
reason over HTTP and on the WebSocket upgrade; keys rotate; an auth proxy's headers count only
from a trusted address."""

import base64
import hashlib
import hmac
import http.client
import json
import secrets
import socket
import sys
import time
import urllib.parse
from pathlib import Path

import pytest
from access_client import ws as ws_exchange
from harness import Server
from selenium.webdriver.common.by import By

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "oidc"))
from provider import Provider  # noqa: E402

PUBLISHER_TOKEN = "publisher-token-0123456789abcdef"
USERS = {"alice": ("alice-password", ["team-a"]), "bob": ("bob-password", ["team-b"])}


def access(**extra):
    """Readers by group, one publisher by token; nobody reads without signing in."""
    return {
        "anonymousRead": False,
        "readers": [
            {"name": "team-a", "groups": ["team-a"], "patterns": ["a.*"]},
            {"name": "team-b", "groups": ["team-b"], "patterns": ["b.*"]},
        ],
        "publishers": [{"name": "ci", "token": PUBLISHER_TOKEN, "patterns": ["*"]}],
        **extra,
    }


def provider_settings(provider, **extra):
    return {"issuer": provider.issuer, "clientId": "ringcast", "displayName": "Test ID", **extra}


def publish(server, *ids):
    for task_id in ids:
        request(server, "POST", f"/api/tasks/{task_id}", {"title": task_id, "progress": 0.5},
                headers={"Authorization": f"Bearer {PUBLISHER_TOKEN}"})


def request(server, method, path, body=None, headers=None, source=None):
    """One HTTP request from `source` (a loopback address to send from); (status, JSON or text)."""
    connection = http.client.HTTPConnection(server.host, server.port, timeout=10,
                                            source_address=(source, 0) if source else None)
    data = None if body is None else json.dumps(body).encode()
    connection.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
    answer = connection.getresponse()
    raw = answer.read().decode()
    connection.close()
    try:
        return answer.status, json.loads(raw)
    except ValueError:
        return answer.status, raw


def watch(server, headers, source=None):
    """A WebSocket watching everything it may: (frames, close)."""
    if source is None:
        got = ws_exchange({"ws": f"{server.ws_base}/ws?watch=*", "headers": headers, "seconds": 3})
        return [json.loads(f) for f in got["frames"]], got["close"]
    original = socket.create_connection

    def from_source(address, timeout=None, source_address=None):
        return original(address, timeout, (source, 0))

    socket.create_connection = from_source
    try:
        got = ws_exchange({"ws": f"{server.ws_base}/ws?watch=*", "headers": headers, "seconds": 3})
    finally:
        socket.create_connection = original
    return [json.loads(f) for f in got["frames"]], got["close"]


def snapshot_ids(frames):
    for frame in frames:
        for event in frame if isinstance(frame, list) else [frame]:
            if event.get("type") == "snapshot":
                return {t["id"] for t in event["tasks"]}
    return None


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned(header, claims, signature=b""):
    return f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}.{b64(signature)}"


@pytest.fixture(scope="module")
def providers():
    a = Provider(USERS).start()
    b = Provider(USERS, algorithm="ES256").start()
    yield a, b
    a.stop()
    b.stop()


@pytest.fixture(scope="module")
def oidc_server(providers, tmp_path_factory):
    a, b = providers
    s = Server(workdir=tmp_path_factory.mktemp("oidc"), settings={
        **access(), "oidc": [provider_settings(a, keysRefetchSeconds=30), provider_settings(b, displayName="Other ID")]})
    s.start()
    publish(s, "a.one", "b.one")
    yield s
    s.stop()


def refused_everywhere(server, token, reason):
    """The token is refused with `reason` in the message over HTTP and on the WebSocket upgrade."""
    status, body = request(server, "GET", "/api/tasks", headers={"Authorization": f"Bearer {token}"})
    assert status == 401, (status, body)
    assert reason in body["message"], body
    frames, close = watch(server, {"Authorization": f"Bearer {token}"})
    errors = [f for f in frames if isinstance(f, dict) and f.get("type") == "error"]
    assert errors and reason in errors[0]["message"], frames
    assert close is not None and close[0] == 4401 and reason in close[1], close
    assert snapshot_ids(frames) is None


def test_a_provider_token_reads_its_groups_tasks_over_http_and_the_websocket(oidc_server, providers):
    a, _ = providers
    token = a.mint(a.claims("alice", ["team-a"]))
    status, body = request(oidc_server, "GET", "/api/tasks", headers={"Authorization": f"Bearer {token}"})
    assert status == 200, body
    assert {t["id"] for t in body["tasks"]} == {"a.one"}
    status, session = request(oidc_server, "GET", "/api/session", headers={"Authorization": f"Bearer {token}"})
    assert (session["name"], session["kind"], session["read"], session["publish"]) == ("alice", "person", ["a.*"], [])
    frames, close = watch(oidc_server, {"Authorization": f"Bearer {token}"})
    assert snapshot_ids(frames) == {"a.one"}, frames
    # The same token in an `auth` message, as the widget sends it.
    got = ws_exchange({"ws": f"{oidc_server.ws_base}/ws?watch=*", "send": [json.dumps({"type": "auth", "token": token})],
                       "seconds": 2})
    assert snapshot_ids([json.loads(f) for f in got["frames"]]) == {"a.one"}, got
    # A person of no configured group is told which groups they came with.
    stranger = a.mint(a.claims("carol", ["team-z"]))
    status, body = request(oidc_server, "GET", "/api/tasks", headers={"Authorization": f"Bearer {stranger}"})
    assert status == 403 and "'team-z'" in body["message"], body


@pytest.mark.parametrize("case", ["alg-none", "hs256-with-public-key", "wrong-issuer", "wrong-audience", "expired",
                                  "not-yet-valid", "unknown-kid", "issuer-a-with-issuer-b-kid"])
def test_a_bad_provider_token_is_refused_with_its_reason(oidc_server, providers, case):
    a, b = providers
    now = int(time.time())
    good = a.claims("alice", ["team-a"])
    if case == "alg-none":
        token, reason = unsigned({"alg": "none", "kid": a.kid}, good), "unsigned (alg none)"
    elif case == "hs256-with-public-key":
        # The classic confusion: the public key (which anyone can download) as an HMAC secret.
        head = b64(json.dumps({"alg": "HS256", "kid": a.kid}).encode()) + "." + b64(json.dumps(good).encode())
        mac = hmac.new(a.public_pem(), head.encode(), hashlib.sha256).digest()
        token, reason = f"{head}.{b64(mac)}", "HMAC algorithm"
    elif case == "wrong-issuer":
        stranger = Provider(USERS).start()
        try:
            token = stranger.mint(stranger.claims("alice", ["team-a"]))
        finally:
            stranger.stop()
        reason = "not a provider this server trusts"
    elif case == "wrong-audience":
        token, reason = a.mint({**good, "aud": "another-app"}), "is meant for \"another-app\""
    elif case == "expired":
        token, reason = a.mint({**good, "iat": now - 7200, "exp": now - 3600}), "expired at"
    elif case == "not-yet-valid":
        token, reason = a.mint({**good, "nbf": now + 3600}), "is not valid before"
    elif case == "unknown-kid":
        rogue = Provider(USERS)  # a key the provider never published, under a kid it does not know
        token, reason = a.mint(good, key=rogue.current), "does not publish"
    else:
        # Issuer A's claims signed with issuer B's key under B's kid: B's key must not vouch for A.
        token, reason = b.mint(good), "does not publish"
    refused_everywhere(oidc_server, token, reason)


def test_a_flood_of_unknown_kids_costs_the_provider_at_most_one_fetch_a_window(oidc_server, providers):
    a, _ = providers
    rogue = Provider(USERS)
    before = a.jwks_fetches
    for _ in range(40):
        token = a.mint(a.claims("alice", ["team-a"]), key=rogue.current, header={"kid": f"made-up-{secrets.token_hex(6)}"})
        status, body = request(oidc_server, "GET", "/api/tasks", headers={"Authorization": f"Bearer {token}"})
        assert status == 401 and "does not publish" in body["message"], body
    assert a.jwks_fetches - before <= 1, f"{a.jwks_fetches - before} JWKS fetches for 40 unknown kids in one window"
    # The keys the server holds still work meanwhile.
    status, _ = request(oidc_server, "GET", "/api/tasks",
                        headers={"Authorization": f"Bearer {a.mint(a.claims('alice', ['team-a']))}"})
    assert status == 200


def test_a_watcher_whose_session_ends_is_closed_with_4440(providers, tmp_path):
    a, _ = providers
    s = Server(workdir=tmp_path, settings={**access(), "oidc": provider_settings(a, leewaySeconds=0, sessionMaxAgeSeconds=60)})
    try:
        s.start()
        publish(s, "a.one")
        now = int(time.time())
        # Signed in 58 s ago: sessionMaxAgeSeconds (60) ends the session in 2 s, long before exp.
        token = a.mint(a.claims("alice", ["team-a"], auth_time=now - 58))
        got = ws_exchange({"ws": f"{s.ws_base}/ws?watch=*", "headers": {"Authorization": f"Bearer {token}"}, "seconds": 8})
        frames = [json.loads(f) for f in got["frames"]]
        assert snapshot_ids(frames) == {"a.one"}, frames
        assert got["close"] is not None and got["close"][0] == 4440, got["close"]
        status, body = request(s, "GET", "/api/tasks", headers={"Authorization": f"Bearer {token}"})
        assert status == 401 and "expired" in body["message"], body
    finally:
        s.stop()


def test_a_rotated_key_holds_at_once_and_a_retired_one_stops_once_it_leaves_the_jwks(tmp_path):
    provider = Provider(USERS, algorithm="ES256").start()
    s = Server(workdir=tmp_path, settings={
        **access(), "oidc": provider_settings(provider, keysRefetchSeconds=1, keysMaxAgeSeconds=2)})
    try:
        s.start()
        publish(s, "a.one", "b.one")
        old_kid = provider.kid
        old = provider.mint(provider.claims("alice", ["team-a"]))
        assert request(s, "GET", "/api/tasks", headers={"Authorization": f"Bearer {old}"})[0] == 200
        time.sleep(1.1)  # past the refetch window of the first fetch
        new_kid = provider.rotate()
        new = provider.mint(provider.claims("bob", ["team-b"]))
        assert json.loads(base64.urlsafe_b64decode(new.split(".")[0] + "=="))["kid"] == new_kid
        status, body = request(s, "GET", "/api/tasks", headers={"Authorization": f"Bearer {new}"})
        assert status == 200 and {t["id"] for t in body["tasks"]} == {"b.one"}, body
        # The old key is still published: its tokens hold.
        assert request(s, "GET", "/api/tasks", headers={"Authorization": f"Bearer {old}"})[0] == 200
        provider.retire(old_kid)
        time.sleep(2.2)  # the keys held are older than keysMaxAgeSeconds: the next use fetches them
        status, body = request(s, "GET", "/api/tasks", headers={"Authorization": f"Bearer {old}"})
        assert status == 401 and "does not publish" in body["message"], body
        assert request(s, "GET", "/api/tasks", headers={"Authorization": f"Bearer {new}"})[0] == 200
    finally:
        s.stop()
        provider.stop()


def test_an_auth_proxys_headers_count_from_a_trusted_address_and_nowhere_else(tmp_path):
    s = Server(workdir=tmp_path, settings={
        **access(), "trustedProxies": ["127.0.0.2"],
        "proxyAuth": {"userHeader": "X-Auth-Request-User", "groupsHeader": "X-Auth-Request-Groups"}})
    try:
        s.start()
        publish(s, "a.one", "b.one")
        headers = {"X-Auth-Request-User": "dora", "X-Auth-Request-Groups": "team-x, team-b"}
        status, body = request(s, "GET", "/api/session", headers=headers, source="127.0.0.2")
        assert status == 200 and (body["name"], body["kind"], body["read"]) == ("dora", "person", ["b.*"]), body
        status, body = request(s, "GET", "/api/tasks", headers=headers, source="127.0.0.2")
        assert status == 200 and {t["id"] for t in body["tasks"]} == {"b.one"}, body
        frames, _ = watch(s, headers, source="127.0.0.2")
        assert snapshot_ids(frames) == {"b.one"}, frames
        # The same headers from another loopback address are a client's claim: ignored.
        status, body = request(s, "GET", "/api/tasks", headers=headers, source="127.0.0.1")
        assert status == 401, body
        status, body = request(s, "GET", "/api/session", headers=headers, source="127.0.0.1")
        assert body.get("name") != "dora", body
        frames, _ = watch(s, headers, source="127.0.0.1")
        assert snapshot_ids(frames) is None, frames
    finally:
        s.stop()


def jwt_header(token):
    """A JWT's header, decoded."""
    return json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))


def form_shown(d):
    return d.execute_script("return !document.getElementById('signin').hidden")


def card_ids(d):
    return set(d.execute_script("return [...document.querySelectorAll('.task:not(.leaving)')].map(c => c.dataset.id)"))


def wait(d, cond, timeout=10, message="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"{message} within {timeout} s; at {d.current_url}")


def sign_in(d, server, user, provider="Test ID"):
    d.delete_all_cookies()
    d.get(server.base + "/")
    wait(d, lambda: form_shown(d), message="the sign-in form")
    # The form asks the server which providers to offer: the links come once it has answered.
    wait(d, lambda: d.find_elements(By.LINK_TEXT, f"Sign in with {provider}"), message="the provider's sign-in link")
    d.find_element(By.LINK_TEXT, f"Sign in with {provider}").click()
    wait(d, lambda: d.find_elements(By.ID, "password"), message="the provider's login form")
    d.find_element(By.ID, "username").send_keys(user)
    d.find_element(By.ID, "password").send_keys(USERS[user][0])
    d.find_element(By.ID, "login").click()


def test_a_person_signs_in_at_the_provider_in_chromium_and_sees_exactly_their_groups_tasks(oidc_server, providers, driver):
    a, _ = providers
    d = driver
    asked = len(a.token_requests)
    sign_in(d, oidc_server, "alice")
    wait(d, lambda: d.current_url.startswith(oidc_server.base) and not form_shown(d) and card_ids(d) == {"a.one"},
         message="alice's dashboard with team-a's task")
    assert d.execute_script("return document.getElementById('signed-in-as').textContent") == "alice"
    cookie = {c["name"]: c for c in d.get_cookies()}["ringcast_token"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    # The code was traded with its PKCE verifier, once.
    trades = a.token_requests[asked:]
    assert len(trades) == 1 and trades[0]["code_verifier"], trades
    # The session works for the API too, and only for team-a's tasks.
    status, _ = request(oidc_server, "GET", "/api/tasks/b.one", headers={"Cookie": f"ringcast_token={cookie['value']}"})
    assert status == 403

    # Sign out ends it: the cookie is gone, and a copy of it is refused from then on.
    d.find_element(By.ID, "signout").click()
    wait(d, lambda: form_shown(d), message="the form after signing out")
    assert "ringcast_token" not in {c["name"] for c in d.get_cookies()}
    assert card_ids(d) == set()
    status, body = request(oidc_server, "GET", "/api/tasks", headers={"Cookie": f"ringcast_token={cookie['value']}"})
    assert status == 401 and "signed out" in body["message"], body

    # Another group's person sees the other tasks; signed in at the other provider, whose ID tokens are ES256.
    sign_in(d, oidc_server, "bob", provider="Other ID")
    wait(d, lambda: d.current_url.startswith(oidc_server.base) and not form_shown(d) and card_ids(d) == {"b.one"},
         message="bob's dashboard with team-b's task")
    assert jwt_header(cookie["value"])["alg"] == "RS256"
    bobs = {c["name"]: c for c in d.get_cookies()}["ringcast_token"]["value"]
    assert jwt_header(bobs)["alg"] == "ES256"
    d.get(oidc_server.base + "/auth/logout")
    wait(d, lambda: form_shown(d), message="the form after /auth/logout")
    assert "ringcast_token" not in {c["name"] for c in d.get_cookies()}


def test_a_callback_with_a_state_this_browser_did_not_begin_is_refused(oidc_server):
    status, body = request(oidc_server, "GET", "/auth/callback?" + urllib.parse.urlencode({"code": "x", "state": "forged"}),
                           headers={"Cookie": "ringcast_signin=another"})
    assert status == 400 and "state" in body["message"], body
    status, body = request(oidc_server, "GET", "/auth/callback?" + urllib.parse.urlencode({"code": "x", "state": "forged"}),
                           headers={"Cookie": "ringcast_signin=forged"})
    assert status == 400 and "unknown" in body["message"], body
