"""tqdm bars mirrored to Ringcast tasks.

    from ringcast.tqdm import tqdm            # instead of: from tqdm import tqdm
    for batch in tqdm(loader, desc="train", ringcast_task="ml.train"):
        ...

The subclass prints exactly what tqdm prints. Each time tqdm redraws the bar (at most every
`mininterval`, 0.1 s) the mirror looks too, and at most every `ringcast_interval` (0.25 s) it
queues the bar's `n` and `total` as the task's completed and total, its description as the
title, and its rate and postfix as the detail; the client merges and sends in the background.
The task ends with the bar: `done` when it closes normally, `failed` with the exception's text,
`cancelled` on KeyboardInterrupt or a cancel from the dashboard (which raises
`ringcast.Cancelled` at the bar's next update), and a pause blocks the bar's next update until
the dashboard resumes. A bar opened while another is open in the same thread (a nested loop)
becomes its child, `OUTER.desc`; with `leave=False` it is hidden when it ends.

A `for` loop that stops early tells its bar nothing of why (the generator only sees that it was
closed): such a bar ends `failed` with the exception's text if that exception reaches
`sys.excepthook` (or `threading.excepthook`), and `done` if the program goes on for
`ringcast.tqdm.DECIDE_AFTER` seconds, or exits, without one (a `break`, or an exception caught).

`wrap(bar, task=…)` attaches the same mirror to a bar made elsewhere (a library's)."""

from __future__ import annotations

import os
import re
import sys
import threading
import time
import weakref
from typing import Any

from tqdm import tqdm as _tqdm

from ._control import OFFERED, ControlState
from ._errors import Cancelled
from ._fields import UNSET, check_id, clip_detail, update_fields
from .client import Ringcast, default_client
from .task import describe, fresh_fields

__all__ = ["tqdm", "trange", "wrap", "DECIDE_AFTER"]

# Seconds a bar whose loop was left early waits for an uncaught exception before it ends done.
DECIDE_AFTER = 2.0

_open_bars = threading.local()
_all_open: weakref.WeakSet[Mirror] = weakref.WeakSet()
_undecided: weakref.WeakSet[Mirror] = weakref.WeakSet()
_hooks_lock = threading.Lock()
_hooks_installed = False


def _slug(text: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", text.strip()).strip("-._")
    return slug[:60]


def _program_name() -> str:
    name = _slug(os.path.splitext(os.path.basename(sys.argv[0] if sys.argv and sys.argv[0] else ""))[0])
    return name if name and name[0].isalnum() else "python"


def _stack() -> list[Mirror]:
    stack = getattr(_open_bars, "stack", None)
    if stack is None:
        stack = _open_bars.stack = []
    return stack  # type: ignore[no-any-return]


class Mirror:
    """Publishes one tqdm bar as one task. `observe()` runs where tqdm redraws, `checkpoint()`
    where it counts, `closed()` where it closes: each in the bar's thread."""

    def __init__(
        self, bar: Any, *, task: str | None, client: Ringcast | None, parent: Any, interval: float,
        stale_after: float | None, on_cancel: Any = None,
    ) -> None:
        self.bar = bar
        self.client = client or default_client()
        self.interval = interval
        self.stale_after = stale_after
        outer = self._outer(bar) if parent is UNSET else None
        self.parent_id: str | None = outer.id if outer is not None else (parent if parent is not UNSET else None)
        self.id = check_id(task or self._derived_id(bar, outer))
        self.control = ControlState(self.id, on_cancel)
        self.leave = bool(bar.leave) if bar.leave is not None else outer is None
        self.last_look = 0.0
        self.sent: dict[str, Any] = {}
        self.ended = False
        self.ending = threading.Lock()
        self.left_early = False
        self.thread = threading.get_ident()

    @staticmethod
    def _outer(bar: Any) -> Mirror | None:
        """The bar this one nests in: the innermost open one in this thread, else (a bar placed
        with `position` from another thread) the open one at position 0."""
        stack = [m for m in _stack() if not m.ended]
        if stack:
            return stack[-1]
        if abs(getattr(bar, "pos", 0)):
            for mirror in list(_all_open):
                if not mirror.ended and abs(getattr(mirror.bar, "pos", 1)) == 0:
                    return mirror
        return None

    @staticmethod
    def _derived_id(bar: Any, outer: Mirror | None) -> str:
        desc = _slug(str(bar.desc or "").rstrip(": "))
        if outer is not None:
            return f"{outer.id}.{desc or 'bar' + str(abs(getattr(bar, 'pos', 0)))}"
        return f"{_program_name()}.{desc}" if desc else _program_name()

    def start(self) -> None:
        fields = fresh_fields(self.stale_after)
        fields.update(self._progress_fields(), title=self._title())
        if self.parent_id is not None:
            fields["parent"] = self.parent_id
        self.client.send("update", self.id, fields)
        self.client.publisher.offer_controls(self.id, OFFERED, self.control.handle)
        if self.stale_after is not None:
            self.client.publisher.lease(self.id, self.stale_after)
        _stack().append(self)
        _all_open.add(self)
        self.last_look = time.monotonic()

    def _title(self) -> str:
        title = str(self.bar.desc or "").rstrip(": ").strip()
        return (title or self.id)[:200]

    def _progress_fields(self) -> dict[str, Any]:
        bar = self.bar
        n, total = bar.n, bar.total
        if total is not None and total > 0 and n is not None and n >= 0:
            return update_fields(completed=min(n, total), total=total)
        return {"progress": None, "completed": max(0, n or 0), "total": None}

    def _detail(self) -> str | None:
        info = self.bar.format_dict
        parts = []
        rate = info.get("rate")
        elapsed = info.get("elapsed")
        if rate is None and elapsed:
            # tqdm's own fallback before its moving average has a step: the mean rate so far.
            rate = (info["n"] - (info.get("initial") or 0)) / elapsed
        if rate:
            unit = info.get("unit") or "it"
            if info.get("unit_scale"):
                parts.append(f"{_tqdm.format_sizeof(rate, divisor=info.get('unit_divisor') or 1000)}{unit}/s")
            else:
                parts.append(f"{rate:.3g} {unit}/s")
        postfix = info.get("postfix")
        if postfix:
            parts.append(str(postfix))
        return clip_detail(" · ".join(parts)) if parts else None

    def observe(self, force: bool = False) -> None:
        """Where tqdm redraws: queues what changed, at most every `interval`."""
        if self.ended:
            return
        now = time.monotonic()
        if not force and now - self.last_look < self.interval:
            return
        self.last_look = now
        self._look()

    def _look(self) -> None:
        fields = self._progress_fields()
        fields["title"] = self._title()
        detail = self._detail()
        if detail is not None:
            fields["detail"] = detail
        changed = {k: v for k, v in fields.items() if self.sent.get(k, UNSET) != v}
        if changed:
            self.sent.update(changed)
            self.client.send("update", self.id, changed)

    def checkpoint(self) -> None:
        """Where tqdm counts: hears the dashboard (Cancelled raised, a pause waited through)."""
        if self.control.pending and not self.ended:
            self.control.checkpoint(self._publish_state)

    def _publish_state(self, state: str) -> None:
        self.observe(force=True)
        self.client.send("update", self.id, {"state": state})
        if state == "running" and hasattr(self.bar, "unpause"):
            self.bar.unpause()

    def closed(self) -> None:
        """Where the bar closed: ends the task, or leaves it to be decided (see the module's docs)."""
        if self.ended or self.left_early:
            return
        error = sys.exc_info()[1]
        if isinstance(error, GeneratorExit) and not self.control.cancel_raised:
            self._left_early()
            return
        if self.control.cancel_raised or (self.control.cancel_requested and self.control.on_cancel is not None):
            error = Cancelled(self.id)
        self.end(error)

    def end(self, error: BaseException | None) -> None:
        # The bar's thread, an excepthook and the publisher thread's decision may all get here.
        with self.ending:
            if self.ended:
                return
            self.ended = True
        self._look()
        if error is None:
            fields: dict[str, Any] = {"state": "done"}
            if not self.leave:
                fields["visible"] = False
        elif isinstance(error, (Cancelled, KeyboardInterrupt)):
            fields = {"state": "cancelled"}
        else:
            fields = {"state": "failed", "detail": describe(error)}
        self.client.send("update", self.id, fields, force=True)
        self._release()

    def _release(self) -> None:
        publisher = self.client.publisher
        publisher.lease(self.id, None)
        publisher.withdraw_controls(self.id, self.control.handle)
        stack = _stack()
        if self in stack:
            stack.remove(self)
        _all_open.discard(self)
        _undecided.discard(self)

    def _left_early(self) -> None:
        self.left_early = True
        self.observe(force=True)
        _install_hooks()
        _undecided.add(self)
        stack = _stack()
        if self in stack:
            stack.remove(self)
        self.client.publisher.call_later(DECIDE_AFTER, lambda: self.end(None))
        _decide_at_close(self.client)


_deciding_clients: weakref.WeakSet[Ringcast] = weakref.WeakSet()


def _decide_at_close(client: Ringcast) -> None:
    """Ends, when `client` closes (or the program exits), the bars of it still undecided; one hook a client."""
    with _hooks_lock:
        if client in _deciding_clients:
            return
        _deciding_clients.add(client)

    def decide() -> None:
        for mirror in list(_undecided):
            if mirror.client is client:
                mirror.end(None)

    client.on_closing(decide)


def _decide(thread: int | None, error: BaseException) -> None:
    for mirror in list(_undecided):
        if thread is None or mirror.thread == thread:
            mirror.end(error)


def _install_hooks() -> None:
    """Chains sys.excepthook and threading.excepthook (once), so an exception that ends the
    program or a thread also ends the bars its loops left."""
    global _hooks_installed
    with _hooks_lock:
        if _hooks_installed:
            return
        _hooks_installed = True
        previous = sys.excepthook

        def excepthook(kind: Any, error: BaseException, traceback: Any) -> None:
            _decide(threading.main_thread().ident, error)
            previous(kind, error, traceback)

        sys.excepthook = excepthook
        previous_thread = threading.excepthook

        def thread_excepthook(args: Any) -> None:
            if args.exc_value is not None:
                _decide(args.thread.ident if args.thread is not None else None, args.exc_value)
            previous_thread(args)

        threading.excepthook = thread_excepthook


class tqdm(_tqdm):  # noqa: N801 (tqdm's own name, so that it drops in)
    """tqdm, mirrored to a Ringcast task. Takes tqdm's arguments, and:

    - `ringcast_task`: the task id (default: the program's name and the bar's description, or
      `OUTER.desc` for a bar nested in another);
    - `ringcast_client`: a Ringcast (default: one made from RINGCAST_URL and RINGCAST_TOKEN);
    - `ringcast_parent`: the task id this bar's task rolls up into (default: the enclosing bar's);
    - `ringcast_interval`: the least time between two updates of the task (0.25 s);
    - `ringcast_stale_after`: the lease while the bar is open (10 s; None for none);
    - `ringcast_on_cancel`: called on a cancel request instead of raising Cancelled."""

    def __init__(
        self, *args: Any, ringcast_task: str | None = None, ringcast_client: Ringcast | None = None,
        ringcast_parent: Any = UNSET, ringcast_interval: float = 0.25, ringcast_stale_after: float | None = 10.0,
        ringcast_on_cancel: Any = None, **kwargs: Any,
    ) -> None:
        self._ringcast: Mirror | None = None
        super().__init__(*args, **kwargs)
        if self.disable:
            return
        self._ringcast = Mirror(self, task=ringcast_task, client=ringcast_client, parent=ringcast_parent,
                                interval=ringcast_interval, stale_after=ringcast_stale_after, on_cancel=ringcast_on_cancel)
        self._ringcast.start()

    def display(self, msg: str | None = None, pos: int | None = None) -> Any:
        shown = super().display(msg, pos)
        if self._ringcast is not None:
            self._ringcast.observe()
        return shown

    def update(self, n: float = 1) -> Any:
        shown = super().update(n)
        mirror = self._ringcast
        if mirror is not None and mirror.control.pending:
            mirror.checkpoint()
        return shown

    def close(self) -> None:
        super().close()
        mirror = getattr(self, "_ringcast", None)
        if mirror is not None:
            mirror.closed()

    def __exit__(self, kind: Any, error: Any, traceback: Any) -> None:
        mirror = getattr(self, "_ringcast", None)
        if mirror is not None and error is not None and mirror.left_early:
            # The with-block knows what the loop inside it did not.
            mirror.end(error)
        super().__exit__(kind, error, traceback)


def trange(*args: Any, **kwargs: Any) -> tqdm:
    """`tqdm(range(*args), **kwargs)`, mirrored."""
    return tqdm(range(*args), **kwargs)


def wrap(
    bar: Any, task: str | None = None, *, client: Ringcast | None = None, parent: Any = UNSET,
    interval: float = 0.25, stale_after: float | None = 10.0, on_cancel: Any = None,
) -> Any:
    """Mirrors a tqdm bar made elsewhere (by a library) to task `task`, as the subclass does;
    returns the bar. A disabled or closed bar, or one mirrored already, is returned as it is."""
    if getattr(bar, "_ringcast", None) is not None or getattr(bar, "disable", True):
        return bar
    mirror = Mirror(bar, task=task, client=client, parent=parent, interval=interval, stale_after=stale_after, on_cancel=on_cancel)
    display, update, close = bar.display, bar.update, bar.close

    def mirrored_display(msg: str | None = None, pos: int | None = None) -> Any:
        shown = display(msg, pos)
        mirror.observe()
        return shown

    def mirrored_update(n: float = 1) -> Any:
        shown = update(n)
        if mirror.control.pending:
            mirror.checkpoint()
        return shown

    def mirrored_close() -> None:
        close()
        mirror.closed()

    # Instance attributes come before the class's methods: tqdm's own loop calls these.
    bar.display, bar.update, bar.close = mirrored_display, mirrored_update, mirrored_close
    bar._ringcast = mirror
    mirror.start()
    return bar
