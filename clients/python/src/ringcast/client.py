"""`Ringcast`: the client a Python program publishes progress with."""

from __future__ import annotations

import atexit
import logging
import os
import ssl
import threading
import weakref
from typing import Any, Callable

from . import _default as _default_registry
from ._endpoint import DEFAULT_URL, Endpoint
from ._errors import RingcastError
from ._fields import UNSET, check_id, controls_list, log_lines, show_fields, timer_fields, update_fields
from ._proxy import FROM_ENVIRONMENT
from ._publisher import Publisher, Statistics
from .task import Task

log = logging.getLogger("ringcast")

# Bumped in a forked child: a client made before the fork starts a publisher of its own there.
_fork_generation = 0
_live: weakref.WeakSet[Ringcast] = weakref.WeakSet()
_live_lock = threading.Lock()
_default: Ringcast | None = None


class Ringcast:
    """A connection to a Ringcast server that publishes tasks in the background.

    Every call checks its arguments with the server's rules (a bad value raises RingcastError at
    once, with the server's code, message and field) and queues the event; it never waits for
    the network. Updates to a task merge while they wait, so a tight loop sends the latest value
    a few dozen times a second, not every value; states, shows, hides, timers, removals and log
    lines are never merged away. A thread of the client's own holds one WebSocket to the server,
    reconnects by itself, and sends again what the server had not acknowledged.

    `url` and `token` default to `RINGCAST_URL` and `RINGCAST_TOKEN`, as the `ringcast` command
    line reads them (`http://127.0.0.1:8080` and no token when unset: loopback may publish
    without one by default). The WebSocket and the HTTP reads go through the proxy the environment
    names for the server (`HTTPS_PROXY` for https/wss, `HTTP_PROXY` for http/ws, unless `NO_PROXY`
    names its host; lower-case forms too), by HTTP CONNECT; `proxy="http://HOST:PORT"` overrides
    the environment, and `proxy=None` goes direct. Arguments left out of a call leave the task's field as it is; None
    sends null, which clears it (`progress=None`: indeterminate, a spinner).

    What the server refuses later (a `hide` of a task that does not exist, a token without the
    pattern) is raised by the next `flush()`, kept in `errors` and passed to `on_error`.
    `on_control(id, action)` hears cancel, pause and resume requests for tasks that no `task()`
    or tqdm bar handles. At interpreter exit every client flushes what it holds (for at most
    `exit_timeout` seconds, and not at all when it never reached its server)."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        send_interval: float = 0.05,
        queue_limit: int = 10000,
        timeout: float = 10.0,
        exit_timeout: float = 5.0,
        on_error: Callable[[RingcastError], None] | None = None,
        on_control: Callable[[str, str], None] | None = None,
        ssl_context: ssl.SSLContext | None = None,
        proxy: Any = FROM_ENVIRONMENT,
    ) -> None:
        self.url = url or os.environ.get("RINGCAST_URL") or DEFAULT_URL
        token = token if token is not None else (os.environ.get("RINGCAST_TOKEN") or None)
        if token is not None and not all(0x20 < ord(c) < 0x7F for c in token):
            raise RingcastError("invalid_token", "a token is printable ASCII without spaces", "token")
        self._endpoint = Endpoint(self.url, ssl_context, proxy)
        self._token = token
        self._settings = {
            "send_interval": send_interval,
            "queue_limit": queue_limit,
            "connect_timeout": timeout,
            "on_error": on_error,
            "on_control": on_control,
        }
        self.timeout = timeout
        self.exit_timeout = exit_timeout
        self._closing_hooks: list[Callable[[], None]] = []
        self._hooks_lock = threading.Lock()
        self._closed = False
        self._generation = _fork_generation
        self._publisher = Publisher(self._endpoint, token, **self._settings)  # type: ignore[arg-type]
        with _live_lock:
            _live.add(self)

    # MARK: publishing

    @property
    def publisher(self) -> Publisher:
        if self._generation != _fork_generation:
            # A forked child (a Celery or multiprocessing worker): the parent's thread did not
            # come along. What the parent had queued is the parent's to send.
            self._generation = _fork_generation
            self._publisher.abandon_after_fork()
            self._publisher = Publisher(self._endpoint, self._token, **self._settings)  # type: ignore[arg-type]
        return self._publisher

    def send(self, type: str, id: str, fields: dict[str, Any], *, force: bool = False) -> None:
        """Queues one event as the wire spells it (checked already)."""
        self.publisher.enqueue(type, id, fields, force=force)

    def update(
        self,
        id: str,
        *,
        progress: Any = UNSET,
        completed: Any = UNSET,
        total: Any = UNSET,
        title: Any = UNSET,
        detail: Any = UNSET,
        state: Any = UNSET,
        parent: Any = UNSET,
        stale_after: Any = UNSET,
        controls: Any = UNSET,
        visible: Any = UNSET,
        modal: Any = UNSET,
        hide_after: Any = UNSET,
        kind: Any = UNSET,
        abandon_after: Any = UNSET,
    ) -> None:
        """Creates or updates task `id`; only the arguments given change.

        `progress` is a fraction from 0 to 1 (None: indeterminate); `completed`/`total` are unit
        counts (the server derives the fraction); `state` one of running, paused, done, failed,
        cancelled (`done` also sets progress to 1); `stale_after` a lease in seconds (no update
        for that long turns the task `stalled`); `controls` which of cancel, pause, resume the
        dashboard may ask for (the requests go to `on_control`)."""
        check_id(id)
        fields = update_fields(
            progress=progress, completed=completed, total=total, title=title, detail=detail, state=state, parent=parent,
            stale_after=stale_after, visible=visible, modal=modal, hide_after=hide_after, kind=kind, abandon_after=abandon_after)
        offered = None if controls is UNSET else controls_list(controls)
        if fields or offered is None:
            self.publisher.enqueue("update", id, fields)
        if offered is not None:
            # An event of its own: it is never merged, and a server that does not know the field refuses only it.
            self.publisher.enqueue("update", id, {"controls": offered})

    def show(self, id: str, *, hide_after: float | None = None, modal: bool | None = None, detail: str | None = None) -> None:
        """Shows the task (creating it if new); with `hide_after` the server hides it by itself then."""
        check_id(id)
        self.publisher.enqueue("show", id, show_fields(hide_after=hide_after, modal=modal, detail=detail))

    def hide(self, id: str) -> None:
        check_id(id)
        self.publisher.enqueue("hide", id, {})

    def timer(
        self, id: str, seconds: float, *, interval: float | None = None, title: str | None = None,
        hide_after: float | None = None, start_at: float | None = None,
    ) -> None:
        """Starts a countdown of `seconds` that the server ticks every `interval` (1 s)."""
        check_id(id)
        self.publisher.enqueue("timer", id, timer_fields(seconds, interval=interval, title=title, hide_after=hide_after, start_at=start_at))

    def pause_timer(self, id: str) -> None:
        check_id(id)
        self.publisher.enqueue("pause", id, {})

    def resume_timer(self, id: str) -> None:
        check_id(id)
        self.publisher.enqueue("resume", id, {})

    def cancel_timer(self, id: str) -> None:
        check_id(id)
        self.publisher.enqueue("cancel", id, {})

    def log(self, id: str, lines: Any) -> None:
        """Appends lines (a string, or an iterable of strings) to the log tail of task `id`,
        which must exist; the server keeps the last `logLines` (100) of each task."""
        check_id(id)
        self.publisher.enqueue("log", id, {"lines": log_lines(lines)})

    def remove(self, id: str) -> None:
        check_id(id)
        self.publisher.enqueue("remove", id, {})

    def flush(self, timeout: float | None = 10.0) -> None:
        """Returns once the server has kept everything queued before the call (committed to its
        storage: docs/PROTOCOL.md, "What an answer means"). Raises RingcastError: the first
        refusal the server reported since the last flush, or `timeout` when no acknowledgement
        came in time (what is queued stays queued, and goes when the server is back)."""
        self.publisher.flush(timeout)

    def close(self, timeout: float | None = None) -> None:
        """Ends what tqdm bars left undecided, flushes (at most `timeout` seconds, default the
        client's `timeout`) and stops the client's thread. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._run_closing_hooks()
        try:
            self.publisher.flush(self.timeout if timeout is None else timeout)
        finally:
            self.publisher.close(1.0)
            with _live_lock:
                _live.discard(self)

    def __enter__(self) -> Ringcast:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # MARK: scoped tasks

    def task(
        self,
        id: str,
        *,
        title: str | None = None,
        total: float | None = None,
        parent: str | None = None,
        stale_after: float | None = 10.0,
        cancellable: bool = True,
        on_cancel: Callable[[], None] | None = None,
    ) -> Any:
        """A task that ends the way its `with` block ends: `done`, `failed` with the exception's
        text, or `cancelled` on KeyboardInterrupt or a cancel from the dashboard. See Task."""
        return Task(self, id, title=title, total=total, parent=parent, stale_after=stale_after,
                    cancellable=cancellable, on_cancel=on_cancel)

    # MARK: reading back (HTTP)

    def get(self, id: str) -> dict[str, Any]:
        """The task as the server holds it now (one HTTP request, over within the client's
        `timeout` however the answer drips, and at most 16 MiB of it); RingcastError `not_found`
        if none, `timeout` or `answer_too_large` from a server that does not answer as one."""
        check_id(id)
        return self._endpoint.request("GET", f"/api/tasks/{id}", token=self._token, timeout=self.timeout)  # type: ignore[no-any-return]

    def read_log(self, id: str) -> dict[str, Any]:
        """The task's log tail: `{"id", "logCount", "from", "lines"}` (one HTTP request, bounded
        as get's)."""
        check_id(id)
        return self._endpoint.request("GET", f"/api/tasks/{id}/log", token=self._token, timeout=self.timeout)  # type: ignore[no-any-return]

    # MARK: state

    @property
    def stats(self) -> Statistics:
        """Counts of what the client did (accepted, coalesced, sent, frames, markers, connections)."""
        return self.publisher.stats

    @property
    def errors(self) -> list[RingcastError]:
        """The newest 256 refusals and connection refusals, oldest first."""
        return list(self.publisher.errors)

    @property
    def connected(self) -> bool:
        return self.publisher.connected

    def on_closing(self, hook: Callable[[], None]) -> Callable[[], None]:
        """Runs `hook` before the last flush of `close()` (or of the interpreter's exit); returns
        what removes it."""
        with self._hooks_lock:
            self._closing_hooks.append(hook)

        def remove() -> None:
            with self._hooks_lock:
                if hook in self._closing_hooks:
                    self._closing_hooks.remove(hook)

        return remove

    def _run_closing_hooks(self) -> None:
        with self._hooks_lock:
            hooks, self._closing_hooks = self._closing_hooks, []
        for hook in hooks:
            try:
                hook()
            except Exception:
                log.exception("ringcast: a closing hook raised")

    def _close_at_exit(self) -> None:
        if self._closed or self._generation != _fork_generation:
            return
        self._run_closing_hooks()
        publisher = self.publisher
        if publisher.pending:
            try:
                publisher.flush(self.exit_timeout, unless_unreached=True)
            except RingcastError as error:
                if error.error == "unreachable":
                    log.warning("ringcast: nothing was published: %s", error.message)
                else:
                    log.warning("ringcast: at exit: %s", error)
        self._closed = True
        publisher.close(1.0)


def default_client() -> Ringcast:
    """The client the tqdm bridge and the log handler use when given none: one per process,
    made from `RINGCAST_URL` and `RINGCAST_TOKEN` on first use."""
    global _default
    with _live_lock:
        if _default is None or _default._closed or _default._generation != _fork_generation:
            _default = None
    if _default is None:
        client = Ringcast()
        with _live_lock:
            if _default is None:
                _default = client
    return _default  # type: ignore[return-value]


_default_registry.register(default_client)


def _after_fork_in_child() -> None:
    global _fork_generation, _default, _live_lock
    _fork_generation += 1
    _default = None
    _live_lock = threading.Lock()


def _close_all_at_exit() -> None:
    with _live_lock:
        clients = list(_live)
    for client in clients:
        client._close_at_exit()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_close_all_at_exit)
