"""AsyncRingcast: the same methods as coroutines, and a scoped task that a cancel from the API
cancels while it awaits."""

from __future__ import annotations

import asyncio

import pytest

import ringcast
from ringcast import AsyncRingcast


def test_every_method_as_a_coroutine(live, task_id):
    async def main():
        async with AsyncRingcast(live.url) as rc:
            await rc.update(task_id, completed=3, total=4, title="Async")
            await rc.log(task_id, ["from asyncio"])
            await rc.show(task_id, hide_after=60)
            await rc.flush()
            task = await rc.get(task_id)
            assert (task["completed"], task["title"], "hideAt" in task) == (3, "Async", True)
            assert (await rc.read_log(task_id))["lines"] == ["from asyncio"]
            await rc.hide(task_id)
            await rc.timer(task_id + "-t", 60)
            await rc.pause_timer(task_id + "-t")
            await rc.resume_timer(task_id + "-t")
            await rc.cancel_timer(task_id + "-t")
            await rc.flush()
            assert live.task(task_id)["visible"] is False
            assert live.task(task_id + "-t")["state"] == "cancelled"
            await rc.remove(task_id + "-t")
            await rc.flush()
            assert live.task(task_id + "-t") is None
            with pytest.raises(ringcast.RingcastError):
                await rc.update(task_id, progress=2)
            await rc.hide(task_id + "-missing")
            with pytest.raises(ringcast.RingcastError) as raised:
                await rc.flush()
            assert raised.value.error == "not_found"

    asyncio.run(main())


def test_an_async_task_ends_as_its_block_ends_with_children(live, task_id):
    async def main():
        async with AsyncRingcast(live.url) as rc:
            async with rc.task(task_id, title="Async ETL") as job:
                load = await job.child("load", weight=3)
                await load.update(progress=1 / 3)
                await rc.flush()
                assert live.task(task_id)["progress"] == pytest.approx(1 / 3)
            with pytest.raises(ZeroDivisionError):
                async with rc.task(task_id + "-bad") as task:
                    await task.advance()
                    1 / 0  # noqa: B018

    asyncio.run(main())
    assert live.task(task_id)["state"] == "done" and live.task(task_id + ".load")["state"] == "done"
    assert (live.task(task_id + "-bad")["state"], live.task(task_id + "-bad")["detail"]) == ("failed", "ZeroDivisionError: division by zero")


def test_a_cancel_from_the_api_cancels_the_awaiting_block_and_leaves_as_cancelled(live, task_id):
    async def main():
        async with AsyncRingcast(live.url) as rc:
            with pytest.raises(ringcast.Cancelled):
                async with rc.task(task_id, title="Waits") as task:
                    await task.update(progress=0.1)
                    await rc.flush()
                    loop = asyncio.get_running_loop()
                    await loop.run_in_executor(None, lambda: live.post(f"/api/tasks/{task_id}/cancel"))
                    await asyncio.sleep(60)  # the cancel interrupts this await
            # The asyncio task itself is not left cancelled: the program goes on.
            await asyncio.sleep(0)
            return "went on"

    assert asyncio.run(main()) == "went on"
    assert live.task(task_id)["state"] == "cancelled"
