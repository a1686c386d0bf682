"""`AsyncRingcast`: the client for asyncio programs, with the same methods as `Ringcast`.

The calls queue without touching the network, as `Ringcast`'s do, so they run on the event loop
directly; only a full queue, `flush()` and the end of a task wait, and they wait in an executor
thread, never on the loop. The publisher thread is the same as `Ringcast`'s."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sys
from typing import Any, Callable

from ._control import ControlState
from ._errors import Cancelled, RingcastError
from ._fields import UNSET
from ._publisher import Statistics
from .client import Ringcast
from .task import Event, TaskCore, TaskView, ending_for

__all__ = ["AsyncRingcast", "AsyncTask"]


class AsyncRingcast:
    """`Ringcast` for asyncio: the same arguments, and the same methods as coroutines.

        async with AsyncRingcast() as rc:
            await rc.update("etl.import", progress=0.5)
            async with rc.task("etl.run", total=3) as task:
                await task.advance()
    """

    def __init__(self, url: str | None = None, token: str | None = None, **options: Any) -> None:
        self.client = Ringcast(url, token, **options)

    async def _call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self.client.publisher.has_room:
            return method(*args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(None, functools.partial(method, *args, **kwargs))

    async def update(
        self, id: str, *, progress: Any = UNSET, completed: Any = UNSET, total: Any = UNSET, title: Any = UNSET,
        detail: Any = UNSET, state: Any = UNSET, parent: Any = UNSET, stale_after: Any = UNSET, controls: Any = UNSET,
        visible: Any = UNSET, modal: Any = UNSET, hide_after: Any = UNSET, kind: Any = UNSET, abandon_after: Any = UNSET,
    ) -> None:
        """As Ringcast.update."""
        await self._call(
            self.client.update, id, progress=progress, completed=completed, total=total, title=title, detail=detail, state=state,
            parent=parent, stale_after=stale_after, controls=controls, visible=visible, modal=modal, hide_after=hide_after,
            kind=kind, abandon_after=abandon_after)

    async def show(self, id: str, *, hide_after: float | None = None, modal: bool | None = None, detail: str | None = None) -> None:
        await self._call(self.client.show, id, hide_after=hide_after, modal=modal, detail=detail)

    async def hide(self, id: str) -> None:
        await self._call(self.client.hide, id)

    async def timer(
        self, id: str, seconds: float, *, interval: float | None = None, title: str | None = None,
        hide_after: float | None = None, start_at: float | None = None,
    ) -> None:
        await self._call(self.client.timer, id, seconds, interval=interval, title=title, hide_after=hide_after, start_at=start_at)

    async def pause_timer(self, id: str) -> None:
        await self._call(self.client.pause_timer, id)

    async def resume_timer(self, id: str) -> None:
        await self._call(self.client.resume_timer, id)

    async def cancel_timer(self, id: str) -> None:
        await self._call(self.client.cancel_timer, id)

    async def log(self, id: str, lines: Any) -> None:
        await self._call(self.client.log, id, lines)

    async def remove(self, id: str) -> None:
        await self._call(self.client.remove, id)

    async def flush(self, timeout: float | None = 10.0) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.client.flush, timeout)

    async def close(self, timeout: float | None = None) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.client.close, timeout)

    async def get(self, id: str) -> dict[str, Any]:
        return await asyncio.get_running_loop().run_in_executor(None, self.client.get, id)  # type: ignore[no-any-return]

    async def read_log(self, id: str) -> dict[str, Any]:
        return await asyncio.get_running_loop().run_in_executor(None, self.client.read_log, id)  # type: ignore[no-any-return]

    @property
    def stats(self) -> Statistics:
        return self.client.stats

    @property
    def errors(self) -> list[RingcastError]:
        return self.client.errors

    async def __aenter__(self) -> AsyncRingcast:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def task(
        self, id: str, *, title: str | None = None, total: float | None = None, parent: str | None = None,
        stale_after: float | None = 10.0, cancellable: bool = True, on_cancel: Callable[[], None] | None = None,
    ) -> AsyncTask:
        """`async with rc.task(id) as t:` — as Ringcast.task, and a cancel from the dashboard also
        cancels the asyncio task running the block (its next await raises CancelledError); the
        block's CancelledError then leaves it as `ringcast.Cancelled`."""
        control = ControlState(id, on_cancel) if cancellable else None
        core = TaskCore(self.client.publisher, id, title=title, total=total, parent=parent, stale_after=stale_after,
                        weight=None, root=None, control=control)
        return AsyncTask(self, core)


class AsyncTask(TaskView):
    """A task inside `async with rc.task(…) as t:`, or a child of one; as `ringcast.Task`, awaited."""

    def __init__(self, rc: AsyncRingcast, core: TaskCore) -> None:
        self._rc = rc
        self._core = core
        self._handler: Callable[[str], None] | None = None
        self._running: asyncio.Task[Any] | None = None

    async def __aenter__(self) -> AsyncTask:
        control = self._core.control
        if self._core.root is self._core and control is not None:
            loop = asyncio.get_running_loop()
            self._running = asyncio.current_task()

            def deliver_cancel() -> None:
                # On the loop, so between two steps of the block: the block is suspended at an
                # await, or has heard the cancel at a checkpoint already, or has ended.
                if self._running is not None and not control.cancel_raised:
                    control.cancel_raised = True
                    self._running.cancel()

            def handle(action: str) -> None:
                control.handle(action)
                if action == "cancel" and control.on_cancel is None:
                    loop.call_soon_threadsafe(deliver_cancel)

            self._handler = handle
        if self._core.root is self._core:
            await self._send(self._core.start(self._handler))
            self._core.start_lease()
        return self

    async def __aexit__(self, kind: object, error: BaseException | None, traceback: object) -> None:
        if self._core.root is not self._core:
            state, detail = ending_for(error, None)
            await self._send(self._core.finish_events(state, detail if detail is not None else UNSET))
            return
        self._running = None
        control = self._core.control
        ours = control is not None and control.cancel_requested and control.on_cancel is None
        try:
            await self._send(self._core.end_events(error))
        finally:
            self._core.close(self._handler)
        # Kept in errors; the block's own outcome is what matters here.
        with contextlib.suppress(RingcastError):
            await self._rc.flush(self._rc.client.timeout)
        if ours and isinstance(error, asyncio.CancelledError):
            current = asyncio.current_task()
            if current is not None and sys.version_info >= (3, 11):
                current.uncancel()
            raise Cancelled(self.id) from error

    async def update(self, *, progress: Any = UNSET, completed: Any = UNSET, total: Any = UNSET, title: Any = UNSET, detail: Any = UNSET) -> None:
        await self._checkpoint()
        await self._send(self._core.update_events(progress=progress, completed=completed, total=total, title=title, detail=detail))

    async def advance(self, amount: float = 1) -> None:
        await self._checkpoint()
        await self._send(self._core.advance_events(amount))

    async def child(self, name: str, *, title: str | None = None, weight: float = 1, total: float | None = None) -> AsyncTask:
        core = self._core.child(name, title=title, weight=weight, total=total)
        child = AsyncTask(self._rc, core)
        await child._send(core.start(None))
        core.start_lease()
        return child

    async def finish(self, state: str = "done", detail: Any = UNSET) -> None:
        await self._send(self._core.finish_events(state, detail))

    async def log(self, lines: Any) -> None:
        await self._rc.log(self.id, lines)

    async def _checkpoint(self) -> None:
        control = self._core.root.control
        if control is None or not control.pending:
            return
        root = self._core.root.id
        if control.pause_requested and not control.cancel_requested:
            await self._send([("update", root, {"state": "paused"})])
            await asyncio.get_running_loop().run_in_executor(None, control.wait_while_paused)
            if not control.cancel_requested:
                await self._send([("update", root, {"state": "running"})])
        control.raise_if_cancelled()

    async def _send(self, events: list[Event]) -> None:
        for type, id, fields in events:
            await self._rc._call(self._rc.client.send, type, id, fields)
