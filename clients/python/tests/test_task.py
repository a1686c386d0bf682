"""Scoped tasks: how they end, children by weight, cancel and pause from the API, the lease, and
the log handler."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest
from conftest import wait_for

import ringcast
from ringcast import Cancelled


def test_a_task_ends_done_failed_or_cancelled_as_its_block_ends(rc, live, task_id):
    with rc.task(task_id + "-ok", title="Works", total=4) as task:
        for _ in range(4):
            task.advance()
    done = live.task(task_id + "-ok")
    assert (done["state"], done["completed"], done["title"], done["staleAfter"]) == ("done", 4, "Works", 10)
    assert done["controls"] == ["cancel", "pause", "resume"]

    with pytest.raises(ValueError), rc.task(task_id + "-bad") as task:
        task.update(progress=0.3)
        raise ValueError("row 17 has no date")
    failed = live.task(task_id + "-bad")
    assert (failed["state"], failed["detail"], failed["progress"]) == ("failed", "ValueError: row 17 has no date", 0.3)

    with pytest.raises(KeyboardInterrupt), rc.task(task_id + "-stop"):
        raise KeyboardInterrupt
    assert live.task(task_id + "-stop")["state"] == "cancelled"


def test_a_fresh_run_clears_what_the_last_one_left(rc, live, task_id):
    rc.update(task_id, state="failed", detail="old failure", hide_after=3600)
    rc.flush()
    with rc.task(task_id):
        rc.flush()
        task = live.task(task_id)
        assert task["state"] == "running" and "detail" not in task and "hideAt" not in task


def test_children_roll_up_into_their_parent_by_weight(rc, live, task_id):
    with rc.task(task_id, title="Nightly ETL") as job:
        extract = job.child("extract", weight=1, total=500)
        transform = job.child("transform", weight=2)
        for _ in range(500):
            extract.advance()
        transform.update(progress=0.5)
        rc.flush()
        # extract: 1 of weight 1; transform: 1 of weight 2 → (1 + 1) / 3.
        parent = live.task(task_id)
        assert parent["progress"] == pytest.approx(2 / 3)
        assert live.task(task_id + ".extract")["parent"] == task_id
        with pytest.raises(ringcast.RingcastError) as raised:
            job.child("bad", weight=0)
        assert raised.value.field == "weight"
    assert live.task(task_id)["state"] == "done"
    assert live.task(task_id + ".transform")["state"] == "done"

    with pytest.raises(RuntimeError), rc.task(task_id + "-broken") as job:
        job.child("step")
        raise RuntimeError("disk full")
    assert live.task(task_id + "-broken.step")["state"] == "cancelled"


def test_a_cancel_from_the_api_raises_cancelled_in_the_tasks_thread_at_its_next_update(rc, live, task_id):
    reached = threading.Event()
    outcome = {}

    def work():
        try:
            with rc.task(task_id, title="Cancellable", total=1_000_000) as task:
                for i in range(1_000_000):
                    task.update(completed=i)
                    if i == 10:
                        reached.set()
                    if i > 10:
                        threading.Event().wait(0.001)
        except Cancelled as cancelled:
            outcome["cancelled"] = cancelled
        outcome["last"] = i

    worker = threading.Thread(target=work)
    worker.start()
    assert reached.wait(15)
    rc.flush()
    assert live.post(f"/api/tasks/{task_id}/cancel")["delivered"] == 1
    worker.join(15)
    assert not worker.is_alive()
    assert outcome["cancelled"].id == task_id
    assert outcome["last"] < 999_999
    task = live.task(task_id)
    assert task["state"] == "cancelled" and "cancelRequested" not in task


def test_on_cancel_is_called_instead_and_the_task_still_ends_cancelled(rc, live, task_id):
    stop = threading.Event()
    with rc.task(task_id, on_cancel=stop.set) as task:
        rc.flush()
        live.post(f"/api/tasks/{task_id}/cancel")
        assert stop.wait(15)
        task.update(progress=0.5)  # heard by the callback: nothing is raised here
    assert live.task(task_id)["state"] == "cancelled"


def test_a_pause_blocks_the_next_update_until_resume(rc, live, task_id):
    paused_at = threading.Event()
    finished = threading.Event()

    def work():
        with rc.task(task_id, total=3) as task:
            task.advance()
            rc.flush()
            paused_at.set()
            wait_for(lambda: live.task(task_id).get("pauseRequested"), message="the pause was not marked")
            wait_for(lambda: task._core.root.control.pause_requested, message="the pause did not reach the client")
            task.advance()  # blocks here until the resume
            task.advance()
        finished.set()

    worker = threading.Thread(target=work)
    worker.start()
    assert paused_at.wait(15)
    live.post(f"/api/tasks/{task_id}/pause")
    live.wait_task(task_id, lambda t: t["state"] == "paused")
    assert not finished.is_set()
    assert live.task(task_id)["completed"] == 1
    live.post(f"/api/tasks/{task_id}/resume")
    worker.join(15)
    assert finished.is_set()
    assert live.task(task_id)["state"] == "done" and live.task(task_id)["completed"] == 3


def test_a_task_of_a_killed_process_turns_stalled(live, task_id):
    source = textwrap.dedent(f"""
        import sys, time, ringcast
        rc = ringcast.Ringcast()
        with rc.task("{task_id}", title="Killed", stale_after=30) as task:
            task.update(progress=0.4)
            rc.flush()
            print("ready", flush=True)
            time.sleep(120)
    """)
    process = subprocess.Popen([sys.executable, "-c", source], env=live.env(), stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "ready"
        assert live.task(task_id)["state"] == "running"
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
        task = live.wait_task(task_id, lambda t: t["state"] != "running")
        assert (task["state"], task["progress"]) == ("stalled", 0.4)
    finally:
        if process.poll() is None:
            process.kill()


def test_the_lease_is_renewed_while_the_block_runs(rc, live, task_id):
    with rc.task(task_id, stale_after=0.6) as task:
        task.update(progress=0.1)
        renewals = rc.stats.sent
        wait_for(lambda: rc.stats.sent >= renewals + 4, message="the lease was not renewed")
        assert live.task(task_id)["state"] == "running"
    assert live.task(task_id)["state"] == "done"


def test_the_log_handler_ships_records_to_the_tasks_log(rc, live, task_id):
    logger = logging.getLogger("py-client-test." + task_id)
    logger.setLevel(logging.INFO)
    handler = ringcast.LogHandler(task_id, client=rc)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger.addHandler(handler)
    try:
        logger.info("loaded %d rows", 500)
        logger.warning("2 rows skipped")
        logger.debug("not at this level")
        try:
            raise ValueError("bad row")
        except ValueError:
            logger.exception("row 17")
        logging.getLogger("ringcast").warning("the client's own records are not shipped")
    finally:
        logger.removeHandler(handler)
    rc.flush()
    lines = rc.read_log(task_id)["lines"]
    assert lines[:3] == ["INFO loaded 500 rows", "WARNING 2 rows skipped", "ERROR row 17"]
    assert lines[3] == "Traceback (most recent call last):" and lines[-1] == "ValueError: bad row"
    assert not any("client's own" in line for line in lines)

    with rc.task(task_id + "-scoped") as task:
        logger.addHandler(task.log_handler())
        logger.info("inside the task")
        logger.handlers.clear()
    assert rc.read_log(task_id + "-scoped")["lines"] == ["inside the task"]
