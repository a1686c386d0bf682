"""Fixtures for the Python client's tests: a real `ringcast serve` (RINGCAST_BIN, default the
debug build .build/debug/ringcast; missing, the tests fail) on an ephemeral loopback port, started
with the browser tests' Server (Tests/browser/harness.py), and helpers to read it back."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "Tests" / "browser"))
os.environ.setdefault("RINGCAST_BIN", str(REPO / ".build" / "debug" / "ringcast"))

from harness import Server  # noqa: E402

from ringcast import Ringcast  # noqa: E402


def wait_for(condition, timeout=15.0, message="condition not met", poll=0.02):
    """Polls `condition()` until it is truthy and returns its value; fails after `timeout` s
    (generous: it bounds a hang, it is not what the test asserts)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = condition()
        if last:
            return last
        time.sleep(poll)
    raise AssertionError(f"{message} within {timeout} s (last value {last!r})")


class Live:
    """A started server and the helpers the tests share."""

    def __init__(self, server: Server) -> None:
        self.server = server

    @property
    def url(self) -> str:
        return self.server.base

    def task(self, id):
        """The task as the server holds it, or None."""
        try:
            return self.server.api("GET", f"/api/tasks/{id}")
        except AssertionError as error:
            if "-> 404" in str(error):
                return None
            raise

    def post(self, path, body=None, ok=(200,)):
        return self.server.api("POST", path, {} if body is None else body, ok=ok)

    def metric(self, name):
        import urllib.request

        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as answer:
            for line in answer.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
        raise AssertionError(f"/metrics has no {name}")

    def wait_task(self, id, condition, timeout=15.0):
        """Waits until the task exists and `condition(task)` holds; returns it."""
        return wait_for(lambda: (lambda t: t if t is not None and condition(t) else None)(self.task(id)), timeout,
                        f"task {id} did not reach the expected state")

    def run_python(self, source, *args, env=None, timeout=60):
        """Runs `source` in a new interpreter (this one's, so the package from the checkout) with
        RINGCAST_URL pointing at the server; returns the CompletedProcess."""
        return subprocess.run([sys.executable, "-c", textwrap.dedent(source), *args], env=self.env(env),
                              capture_output=True, text=True, timeout=timeout)

    def env(self, extra=None):
        env = dict(os.environ, RINGCAST_URL=self.url, PYTHONUNBUFFERED="1")
        env.pop("RINGCAST_TOKEN", None)
        env.update(extra or {})
        return env


@pytest.fixture(scope="session")
def live():
    server = Server(heartbeat=2)
    server.start()
    yield Live(server)
    server.stop()


@pytest.fixture
def rc(live):
    client = Ringcast(live.url)
    yield client
    client.close(timeout=5)


@pytest.fixture
def task_id(request):
    """An id of this test's own, so tests sharing the server never see each other's tasks."""
    name = request.node.name.replace("[", "-").replace("]", "").replace("_", "-")
    return f"py.{name}"[:100]
