"""Who may read without a token, from this machine and from another: the real server in a network
namespace of its own, a client in a second one joined to it by a veth pair (addresses of
192.0.2.0/24, TEST-NET-1, which exist only inside the two namespaces the test makes), and the same
client inside the server's namespace on 127.0.0.1 for loopback. For each surface (the task list as
JSON and text, a task, its log, its badge, the kinds, /metrics, a parent's children, the
WebSocket's snapshot and events) anonymous access gets what `anonymousRead` says, and a reader
of `a.*` from the other machine sees its tasks and nothing else. Needs root (CI is); the
namespaces are deleted whatever happens."""

import json
import os
import subprocess
from pathlib import Path

import pytest
from harness import PUBLIC, server_binary

HERE = Path(__file__).resolve().parent
SERVER_NS = f"rc-readers-srv-{os.getpid()}"
CLIENT_NS = f"rc-readers-cli-{os.getpid()}"
SERVER_ADDRESS, CLIENT_ADDRESS = "192.0.2.1", "192.0.2.2"
PORT = 8086
READER_TOKEN = "team-a-reader-token-0123456789"
TASKS = [
    ("a.p", {"title": "A parent"}), ("a.p-1", {"title": "A child", "parent": "a.p", "progress": 0.5}),
    ("b.q", {"title": "B child", "parent": "a.p", "progress": 0.25}), ("public.status", {"title": "Public status"}),
    ("a.build-1", {"title": "A build"}), ("b.secret", {"title": "B secret"}), ("public.build-1", {"title": "Public build"}),
]


def sh(*args):
    return subprocess.run(args, check=True, capture_output=True, text=True)


@pytest.fixture(scope="module")
def namespaces():
    if os.geteuid() != 0:
        pytest.fail("the network namespace test needs root (ip netns add); CI runs as root")
    host_side, client_side = f"rcr{os.getpid()}a"[:15], f"rcr{os.getpid()}b"[:15]
    made = []
    try:
        for ns in (SERVER_NS, CLIENT_NS):
            sh("ip", "netns", "add", ns)
            made.append(ns)
        sh("ip", "link", "add", host_side, "netns", SERVER_NS, "type", "veth", "peer", "name", client_side, "netns", CLIENT_NS)
        for ns, dev, address in ((SERVER_NS, host_side, SERVER_ADDRESS), (CLIENT_NS, client_side, CLIENT_ADDRESS)):
            sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{address}/24", "dev", dev)
            sh("ip", "netns", "exec", ns, "ip", "link", "set", dev, "up")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        yield
    finally:
        for ns in made:  # deleting a namespace deletes the veth end inside it, and so the pair
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True)


class NamespacedServer:
    """`ringcast serve` inside the server's namespace, on every address of it (0.0.0.0)."""

    def __init__(self, tmp_path, **settings):
        binary = server_binary()
        if not binary.exists():
            raise RuntimeError(f"ringcast binary not found at {binary}: build it, or point RINGCAST_BIN at it")
        config = {
            "host": "0.0.0.0", "port": PORT, "publicDir": str(PUBLIC), "allowedHosts": [SERVER_ADDRESS],
            "heartbeatSeconds": 1, "handshakeTimeoutSeconds": 1,
            "readers": [{"name": "team-a", "token": READER_TOKEN, "patterns": ["a.*"]}], **settings,
        }
        path = tmp_path / "config.json"
        path.write_text(json.dumps(config))
        self.log = tmp_path / "server.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(["ip", "netns", "exec", SERVER_NS, str(binary), "serve", "--config", str(path)],
                                         stdout=subprocess.PIPE, stderr=log, start_new_session=True)
        line = self.proc.stdout.readline().decode()
        assert line.startswith("listening on http://"), f"{line!r}: {self.log.read_text()}"

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def run(ns, requests):
    """Each request made by access_client.py inside namespace `ns`; what came back, in order."""
    done = subprocess.run(["ip", "netns", "exec", ns, "python3", str(HERE / "access_client.py"), json.dumps(requests)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def local(path):
    return f"http://127.0.0.1:{PORT}{path}"


def remote(path):
    return f"http://{SERVER_ADDRESS}:{PORT}{path}"


def publish():
    """The tasks, from loopback (anonymous local publishing): two finished runs for the kinds, a log each."""
    requests = [{"http": "POST", "url": local(f"/api/tasks/{i}"), "body": json.dumps(b)} for i, b in TASKS]
    requests += [{"http": "POST", "url": local(f"/api/tasks/{i}"), "body": '{"state":"done"}'} for i in ("a.build-1", "public.build-1")]
    requests += [{"http": "POST", "url": local(f"/api/tasks/{i}/log"), "body": '{"lines":["line of ' + i + '"]}'}
                 for i in ("a.p", "b.secret", "public.status")]
    for answer in run(SERVER_NS, requests):
        assert answer["status"] == 200, answer


def surfaces(base, headers=None):
    """One request per HTTP surface, and a WebSocket that watches everything while a.later, b.later and
    public.later are published from loopback (sent by a second client once the socket is open)."""
    headers = headers or {}
    paths = ["/api/tasks", "/api/tasks?format=text", "/api/tasks/a.p?format=text", "/api/tasks/a.p", "/api/tasks/b.secret",
             "/api/tasks/public.status", "/api/tasks/a.p/log", "/api/tasks/b.secret/log", "/api/tasks/public.status/log",
             "/badge/a.p.svg", "/badge/b.secret.svg", "/badge/public.status.svg", "/api/kinds", "/metrics"]
    return {path: {"http": "GET", "url": base(path), "headers": headers} for path in paths}


def ids(body):
    return {task["id"] for task in json.loads(body)["tasks"]}


def snapshot_ids(frames):
    for frame in frames:
        events = json.loads(frame)
        for event in events if isinstance(events, list) else [events]:
            if event.get("type") == "snapshot":
                return {task["id"] for task in event["tasks"]}
    return None


def event_ids(frames):
    found = set()
    for frame in frames:
        events = json.loads(frame)
        for event in events if isinstance(events, list) else [events]:
            if event.get("type") in ("progress", "show", "state", "log"):
                found.add(event["id"])
    return found


def watch(ns, base_ws, headers=None, query=""):
    """A watcher from `ns` and, published from loopback while it is open, a task of each scope."""
    spec = {"ws": base_ws(f"/ws{query}"), "headers": headers or {}, "seconds": 3}
    later = [{"http": "POST", "url": local(f"/api/tasks/{i}"), "body": "{}"} for i in ("a.later", "b.later", "public.later")]
    watcher = subprocess.Popen(["ip", "netns", "exec", ns, "python3", str(HERE / "access_client.py"), json.dumps([spec])],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Until the watcher has its snapshot (or has ended): what follows are its live events.
    watcher.stderr.readline()
    run(SERVER_NS, later)
    out, err = watcher.communicate(timeout=30)
    assert watcher.returncode == 0, err
    run(SERVER_NS, [{"http": "DELETE", "url": local(f"/api/tasks/{i}")} for i in ("a.later", "b.later", "public.later")])
    return json.loads(out)[0]


def remote_ws(path):
    return f"ws://{SERVER_ADDRESS}:{PORT}{path}"


def local_ws(path):
    return f"ws://127.0.0.1:{PORT}{path}"


ALL = {i for i, _ in TASKS}
A = {"a.p", "a.p-1", "a.build-1"}
PUBLIC_TASKS = {"public.status", "public.build-1"}


def test_by_default_loopback_reads_everything_and_another_machine_nothing_without_a_token(namespaces, tmp_path):
    server = NamespacedServer(tmp_path)
    try:
        publish()
        # From loopback: every surface answers, with everything.
        spec = surfaces(local)
        answers = dict(zip(spec, run(SERVER_NS, list(spec.values())), strict=True))
        assert all(a["status"] == 200 for a in answers.values()), {p: a["status"] for p, a in answers.items()}
        assert ids(answers["/api/tasks"]["body"]) == ALL
        assert "B child" in answers["/api/tasks/a.p?format=text"]["body"]
        assert "line of b.secret" in answers["/api/tasks/b.secret/log"]["body"]
        assert '"a.build"' in answers["/api/kinds"]["body"] and '"public.build"' in answers["/api/kinds"]["body"]
        seen = watch(SERVER_NS, local_ws)
        assert snapshot_ids(seen["frames"]) == ALL
        assert {"a.later", "b.later", "public.later"} <= event_ids(seen["frames"])

        # From the other machine: every surface refuses, 401 with the protocol's error body.
        spec = surfaces(remote)
        answers = dict(zip(spec, run(CLIENT_NS, list(spec.values())), strict=True))
        for path, answer in answers.items():
            assert answer["status"] == 401, (path, answer)
            assert json.loads(answer["body"])["error"] == "unauthorized", path
            assert "line of" not in answer["body"] and "B child" not in answer["body"], path
        # The WebSocket: hello, an error saying why, no snapshot, no event; closed 4401 with the reason.
        refused = watch(CLIENT_NS, remote_ws)
        assert snapshot_ids(refused["frames"]) is None and not event_ids(refused["frames"]), refused
        assert any('"unauthorized"' in f for f in refused["frames"]), refused
        assert refused["close"] is not None and refused["close"][0] == 4401, refused
        assert "needs a token" in refused["close"][1], refused

        # A reader of a.* on the other machine: its tasks on every surface, nothing of b.* or public.*.
        spec = surfaces(remote, {"Authorization": f"Bearer {READER_TOKEN}"})
        answers = dict(zip(spec, run(CLIENT_NS, list(spec.values())), strict=True))
        assert ids(answers["/api/tasks"]["body"]) == A
        assert "A child" in answers["/api/tasks/a.p?format=text"]["body"]
        assert "B child" not in answers["/api/tasks/a.p?format=text"]["body"]
        assert "Public" not in answers["/api/tasks?format=text"]["body"]
        for path in ("/api/tasks/a.p", "/api/tasks/a.p/log", "/badge/a.p.svg", "/api/kinds"):
            assert answers[path]["status"] == 200, (path, answers[path])
        for path in ("/api/tasks/b.secret", "/api/tasks/b.secret/log", "/badge/b.secret.svg", "/api/tasks/public.status", "/metrics"):
            assert answers[path]["status"] == 403, (path, answers[path])
        assert '"a.build"' in answers["/api/kinds"]["body"] and '"public.build"' not in answers["/api/kinds"]["body"]
        seen = watch(CLIENT_NS, remote_ws, {"Authorization": f"Bearer {READER_TOKEN}"})
        assert snapshot_ids(seen["frames"]) == A
        assert event_ids(seen["frames"]) == {"a.later"}, seen
    finally:
        server.stop()


def test_anonymous_read_of_patterns_serves_public_tasks_to_anyone(namespaces, tmp_path):
    server = NamespacedServer(tmp_path, anonymousRead=["public.*"])
    try:
        publish()
        for ns, base, base_ws in ((CLIENT_NS, remote, remote_ws), (SERVER_NS, local, local_ws)):
            spec = surfaces(base)
            answers = dict(zip(spec, run(ns, list(spec.values())), strict=True))
            assert ids(answers["/api/tasks"]["body"]) == PUBLIC_TASKS, ns
            assert "Public status" in answers["/api/tasks?format=text"]["body"]
            assert "A parent" not in answers["/api/tasks?format=text"]["body"]
            for path in ("/api/tasks/public.status", "/api/tasks/public.status/log", "/badge/public.status.svg"):
                assert answers[path]["status"] == 200, (ns, path, answers[path])
            for path in ("/api/tasks/a.p", "/api/tasks/b.secret/log", "/badge/b.secret.svg", "/api/tasks/a.p?format=text"):
                assert answers[path]["status"] == 401, (ns, path, answers[path])
            kinds = answers["/api/kinds"]["body"]
            assert '"public.build"' in kinds and '"a.build"' not in kinds, kinds
            # /metrics counts everything: loopback may read it, another machine without a token may not.
            assert answers["/metrics"]["status"] == (200 if ns == SERVER_NS else 401), ns
            # Watching everything is narrowed to the public tasks; their events, and no other.
            seen = watch(ns, base_ws)
            assert snapshot_ids(seen["frames"]) == PUBLIC_TASKS, (ns, seen)
            assert event_ids(seen["frames"]) == {"public.later"}, (ns, seen)
            # A pattern outside them cannot be narrowed: refused, with the reason.
            outside = watch(ns, base_ws, query="?watch=b.*")
            assert snapshot_ids(outside["frames"]) is None, outside
            assert outside["close"] is not None and outside["close"][0] == 4401, outside
    finally:
        server.stop()


def test_anonymous_read_true_serves_everything_to_anyone(namespaces, tmp_path):
    server = NamespacedServer(tmp_path, anonymousRead=True)
    try:
        publish()
        spec = surfaces(remote)
        answers = dict(zip(spec, run(CLIENT_NS, list(spec.values())), strict=True))
        assert ids(answers["/api/tasks"]["body"]) == ALL
        # Everything, /metrics included: anyone reads every id, as a reader of "*" does.
        assert {p: a["status"] for p, a in answers.items() if a["status"] != 200} == {}
        seen = watch(CLIENT_NS, remote_ws)
        assert snapshot_ids(seen["frames"]) == ALL
        assert {"a.later", "b.later", "public.later"} <= event_ids(seen["frames"])
        # Reading is open; publishing from another machine still needs a token.
        post = run(CLIENT_NS, [{"http": "POST", "url": remote("/api/tasks/a.p"), "body": "{}"}])[0]
        assert post["status"] == 401, post
    finally:
        server.stop()
