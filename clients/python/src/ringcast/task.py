"""Scoped tasks: `with rc.task(id) as t:` ends the task the way the block ends.

The bookkeeping (what a fresh run sets, how a child shares its parent's progress by weight, which
state the end takes) lives in TaskCore, which only computes events; Task (here) and AsyncTask
(`ringcast.aio`) send them, one blocking where the other awaits."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Callable

from ._control import OFFERED, ControlState
from ._errors import Cancelled, RingcastError
from ._fields import UNSET, check_id, clip_detail, update_fields
from ._publisher import Publisher
from .handler import LogHandler

Event = tuple[str, str, dict[str, Any]]


def fresh_fields(stale_after: float | None) -> dict[str, Any]:
    """What a new run sets, as `ringcast run` does: running, visible, no detail, no pending hide, the lease."""
    return {"detail": None, "state": "running", "visible": True, "hideAfter": None, "staleAfter": stale_after}


def describe(error: BaseException) -> str:
    """An exception as a task's detail: its type and text, within the server's 1000 characters."""
    text = str(error)
    return clip_detail(f"{type(error).__name__}: {text}" if text else type(error).__name__)


def ending_for(error: BaseException | None, control: ControlState | None) -> tuple[str, str | None]:
    """The state (and detail) a task ends in when its work ended with `error` (None: normally)."""
    if error is None:
        # A cancel handled by the caller's on_cancel ends the task cancelled however the block ends.
        return ("cancelled", None) if control is not None and control.cancel_requested else ("done", None)
    if isinstance(error, (Cancelled, KeyboardInterrupt, asyncio.CancelledError)):
        return "cancelled", None
    return "failed", describe(error)


class TaskCore:
    """One task of a scope and what it has sent; the root holds the scope's children and controls."""

    def __init__(
        self, publisher: Publisher, id: str, *, title: str | None, total: float | None, parent: str | None,
        stale_after: float | None, weight: float | None, root: TaskCore | None, control: ControlState | None,
    ) -> None:
        check_id(id)
        self.publisher = publisher
        self.id = id
        self.root = root or self
        self.weight = weight
        self.stale_after = stale_after
        self.control = control
        self.total: float | None = total
        self.completed: float = 0
        self.finished: str | None = None
        self.children: list[TaskCore] = []
        fields = fresh_fields(stale_after)
        fields.update(update_fields(title=title if title is not None else UNSET, parent=parent if parent is not None else UNSET))
        if stale_after is not None:
            fields.update(update_fields(stale_after=stale_after))
        if weight is not None:
            fields.update(progress=0, completed=0, total=weight)
        elif total is not None:
            fields.update(update_fields(completed=0, total=total))
        self.opening: list[Event] = [("update", id, fields)]

    @property
    def open(self) -> bool:
        return self.finished is None and self.root.finished is None

    def start(self, on_request: Callable[[str], None] | None) -> list[Event]:
        """The events that open the task (sent before `start_lease`)."""
        events = self.opening
        if on_request is not None:
            self.publisher.offer_controls(self.id, OFFERED, on_request)
        return events

    def start_lease(self) -> None:
        if self.stale_after is not None:
            self.publisher.lease(self.id, self.stale_after)

    def checkpoint(self, publish_state: Callable[[str], None]) -> None:
        control = self.root.control
        if control is not None and control.pending:
            control.checkpoint(publish_state)

    def update_events(self, *, progress: Any, completed: Any, total: Any, title: Any, detail: Any) -> list[Event]:
        if not self.open:
            return []
        fields = update_fields(progress=progress, completed=completed, total=total, title=title, detail=detail)
        if completed is not UNSET and completed is not None:
            self.completed = completed
        if total is not UNSET:
            self.total = total
        if self.weight is not None and ("progress" in fields or "completed" in fields or "total" in fields):
            fraction = self._fraction(fields)
            for name in ("progress", "completed", "total"):
                fields.pop(name, None)
            if fraction is None:
                fields.update(progress=None, completed=None)
            else:
                # A child carries its progress as units out of its weight: the server's exact unit
                # roll-up then gives the parent the weighted sum of its children.
                fields.update(progress=fraction, completed=fraction * self.weight, total=self.weight)
        return [("update", self.id, fields)]

    def _fraction(self, fields: dict[str, Any]) -> float | None:
        if "progress" in fields:
            return fields["progress"]  # type: ignore[no-any-return]
        if self.total:
            return min(1.0, self.completed / self.total)
        return None

    def advance_events(self, amount: float) -> list[Event]:
        completed = self.completed + amount
        return self.update_events(progress=UNSET, completed=completed, total=UNSET, title=UNSET, detail=UNSET)

    def child(self, name: str, *, title: str | None, weight: float, total: float | None) -> TaskCore:
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not weight > 0 or weight != weight:
            raise RingcastError(
                "invalid_field", f"weight {weight} is out of range: a number above 0 (children of weights 2 and 1: the first counts twice)",
                "weight")
        child = TaskCore(self.publisher, f"{self.id}.{name}", title=title if title is not None else name, total=total,
                         parent=self.id, stale_after=self.stale_after, weight=weight, root=self.root, control=None)
        self.root.children.append(child)
        return child

    def finish_events(self, state: str, detail: Any) -> list[Event]:
        """Ends this task now (it keeps that state when its scope ends)."""
        if not self.open:
            return []
        fields = update_fields(state=state, detail=detail)
        if state == "done" and self.weight is not None:
            fields.update(completed=self.weight, total=self.weight)
        self.finished = state
        self.publisher.lease(self.id, None)
        return [("update", self.id, fields)]

    def end_events(self, error: BaseException | None) -> list[Event]:
        """The end of the root's scope: children still running end with it, then the root."""
        state, detail = ending_for(error, self.control)
        events: list[Event] = []
        for child in self.children:
            if child.finished is None:
                events += child.finish_events("done" if state == "done" else "cancelled", UNSET)
        if self.finished is None:
            events += self.finish_events(state, detail if detail is not None else UNSET)
        return events

    def close(self, handler: Callable[[str], None] | None) -> None:
        for task in [self, *self.children]:
            self.publisher.lease(task.id, None)
        if handler is not None:
            self.publisher.withdraw_controls(self.id, handler)


class TaskView:
    """What a Task and an AsyncTask show of the task they work on."""

    _core: TaskCore

    @property
    def id(self) -> str:
        return self._core.id

    @property
    def completed(self) -> float:
        return self._core.completed

    @property
    def cancel_requested(self) -> bool:
        """Whether the dashboard asked to cancel this task's scope."""
        control = self._core.root.control
        return control is not None and control.cancel_requested


class Task(TaskView):
    """A task worked on inside `with rc.task(id, …) as t:` (or a child of one).

    On entry the task is made fresh (running, visible, its old detail and any pending hide
    cleared), offers cancel, pause and resume to the dashboard, and its lease (`stale_after`,
    10 s; None for none) is renewed every third of it by the client's thread while the block
    runs: if the process dies, the dashboard shows `stalled` (at once, since the server sees the
    publisher's socket close). On exit it ends `done`; `failed`, with the exception's type and
    text as its detail, when an exception leaves the block; `cancelled` on KeyboardInterrupt and
    on a cancel from the dashboard. The exception goes on; the end waits (at most the client's
    `timeout`) for the server to keep the final state, and never raises for that.

    A cancel from the dashboard raises `ringcast.Cancelled` in the thread that calls `update` or
    `advance` next (or, with `on_cancel`, calls it on a thread of its own instead: the task ends
    `cancelled` however the block ends). A pause blocks the next `update` or `advance` until
    the dashboard resumes (the task shows `paused` meanwhile)."""

    def __init__(
        self, client: Any, id: str, *, title: str | None = None, total: float | None = None, parent: str | None = None,
        stale_after: float | None = 10.0, cancellable: bool = True, on_cancel: Callable[[], None] | None = None,
        core: TaskCore | None = None,
    ) -> None:
        self._client = client
        control = ControlState(id, on_cancel) if cancellable and core is None else None
        self._core = core or TaskCore(client.publisher, id, title=title, total=total, parent=parent, stale_after=stale_after,
                                      weight=None, root=None, control=control)
        self._handler = control.handle if control is not None else None

    def __enter__(self) -> Task:
        if self._core.root is self._core:
            self._send(self._core.start(self._handler))
            self._core.start_lease()
        return self

    def __exit__(self, kind: object, error: BaseException | None, traceback: object) -> None:
        if self._core.root is not self._core:
            # A child in a `with` block of its own ends the way that block ends; its scope goes on.
            state, detail = ending_for(error, None)
            self._send(self._core.finish_events(state, detail if detail is not None else UNSET))
            return
        try:
            self._send(self._core.end_events(error))
        finally:
            self._core.close(self._handler)
        # Kept in client.errors; the block's own outcome is what matters here.
        with contextlib.suppress(RingcastError):
            self._client.flush(self._client.timeout)

    def update(self, *, progress: Any = UNSET, completed: Any = UNSET, total: Any = UNSET, title: Any = UNSET, detail: Any = UNSET) -> None:
        """Reports progress (a fraction, or unit counts), a new title or detail; first hears the
        dashboard: raises Cancelled on a cancel, blocks through a pause."""
        self._core.checkpoint(self._publish_state)
        self._send(self._core.update_events(progress=progress, completed=completed, total=total, title=title, detail=detail))

    def advance(self, amount: float = 1) -> None:
        """Adds `amount` to `completed` (the task's `total` gives the fraction)."""
        self._core.checkpoint(self._publish_state)
        self._send(self._core.advance_events(amount))

    def child(self, name: str, *, title: str | None = None, weight: float = 1, total: float | None = None) -> Task:
        """A child task `ID.name` whose progress counts `weight` in this one's (weights 2 and 1:
        the first counts twice). It ends with its scope (done, or cancelled when the scope did
        not end done), or earlier with `finish()` or its own `with` block. A parent rolls its
        children up only while it has no progress of its own: give it no `total`."""
        core = self._core.child(name, title=title, weight=weight, total=total)
        child = Task(self._client, core.id, core=core)
        child._send(core.start(None))
        core.start_lease()
        return child

    def finish(self, state: str = "done", detail: Any = UNSET) -> None:
        """Ends this task now in `state` (a child: its parent's scope goes on)."""
        self._send(self._core.finish_events(state, detail))

    def log(self, lines: Any) -> None:
        """Appends lines to this task's log tail."""
        self._client.log(self.id, lines)

    def log_handler(self, level: int = 0) -> Any:
        """A logging.Handler that ships records to this task's log tail."""
        return LogHandler(self.id, client=self._client, level=level)

    def _publish_state(self, state: str) -> None:
        self._client.send("update", self._core.root.id, {"state": state})

    def _send(self, events: list[Event]) -> None:
        for type, id, fields in events:
            self._client.send(type, id, fields)
