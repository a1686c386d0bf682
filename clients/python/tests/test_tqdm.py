"""The tqdm bridge against a real server: a tqdm program run unchanged (done, then
cancelled from the API), nesting, how a bar's end becomes the task's, wrap(), pause, and that
what tqdm prints does not change."""

from __future__ import annotations

import io
import signal
import subprocess
import sys
import threading
import time

import pytest
import tqdm as tqdm_package
from conftest import wait_for

import ringcast
import ringcast.tqdm as bridge

# A training loop as a tqdm user writes it: tqdm from ringcast.tqdm, the task named by ringcast_task.
TRAIN = """from ringcast.tqdm import tqdm
import time
for i in tqdm(range(500), desc="train", ringcast_task="ml.train"):
    time.sleep(0.002)
"""


@pytest.fixture
def train_py(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    return path


def test_the_training_loop_ends_done_at_100_percent_with_total_500(live, train_py):
    result = subprocess.run([sys.executable, str(train_py)], env=live.env(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "500/500" in result.stderr  # tqdm printed its bar as ever
    task = live.task("ml.train")
    assert (task["state"], task["progress"], task["completed"], task["total"], task["title"]) == ("done", 1, 500, 500, "train")


def test_a_second_run_cancelled_from_the_api_ends_cancelled_with_the_loop_stopped_early(live, train_py):
    # The program starts held (the shell stops itself, then execs python in its place) and is let
    # run in slices of 10 ms until the server has its task: however slowly this test or the
    # client's connection goes on a loaded machine, the request below comes while the loop runs.
    held = ["sh", "-c", 'kill -STOP $$; exec "$0" "$@"', sys.executable, str(train_py)]
    process = subprocess.Popen(held, env=live.env(), stderr=subprocess.PIPE, text=True)
    try:
        task = None
        for _ in range(3000):
            task = live.task("ml.train")
            if task["state"] == "running" and task.get("controls") == ["cancel", "pause", "resume"]:
                break
            process.send_signal(signal.SIGCONT)
            time.sleep(0.01)
            process.send_signal(signal.SIGSTOP)
        assert task["state"] == "running" and task["completed"] < 500
        answer = live.post("/api/tasks/ml.train/cancel")
        assert answer["delivered"] == 1 and answer["task"]["cancelRequested"] is True
        process.send_signal(signal.SIGCONT)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)
            process.kill()
    assert process.returncode != 0, stderr[-2000:]
    assert "ringcast._errors.Cancelled: task ml.train was cancelled from the dashboard" in stderr
    task = live.task("ml.train")
    assert task["state"] == "cancelled" and "cancelRequested" not in task
    assert task["completed"] < 500 and task["total"] == 500


def test_what_tqdm_prints_does_not_change(rc, task_id):
    def run(cls, **extra):
        out = io.StringIO()
        with cls(range(50), desc="same", file=out, mininterval=0, ncols=60, bar_format="{desc}: {n}/{total} {postfix}", **extra) as bar:
            for i in bar:
                bar.set_postfix(loss=i)
        return out.getvalue()

    assert run(bridge.tqdm, ringcast_task=task_id, ringcast_client=rc) == run(tqdm_package.tqdm)


def test_the_bar_mirrors_n_total_description_rate_and_postfix(rc, live, task_id):
    with bridge.tqdm(total=200, desc="rows", unit="row", file=io.StringIO(), ringcast_task=task_id, ringcast_client=rc,
                     ringcast_interval=0) as bar:
        for _ in range(120):
            bar.update(1)
            bar.set_postfix_str("orders.csv", refresh=False)
        bar.refresh()
        rc.flush()
        task = live.task(task_id)
        assert (task["completed"], task["total"], task["title"], task["state"]) == (120, 200, "rows", "running")
        assert task["detail"].endswith(" row/s · orders.csv")
    rc.flush()
    assert live.task(task_id)["state"] == "done"


def test_nested_bars_become_children_and_leave_false_hides_them(rc, live, task_id):
    quiet = io.StringIO()
    for epoch in bridge.trange(2, desc="epochs", file=quiet, ringcast_task=task_id, ringcast_client=rc):
        for _ in bridge.tqdm(range(30), desc="batch", leave=False, file=quiet, ringcast_client=rc):
            pass
        if epoch == 0:
            rc.flush()
            child = live.task(task_id + ".batch")
            assert (child["parent"], child["state"], child["completed"], child["visible"]) == (task_id, "done", 30, False)
    rc.flush()
    parent = live.task(task_id)
    assert (parent["state"], parent["completed"], parent["total"]) == ("done", 2, 2)


def test_an_uncaught_exception_in_the_loop_fails_the_task_with_its_text(live, task_id):
    result = live.run_python(f"""
        from ringcast.tqdm import tqdm
        for i in tqdm(range(100), ringcast_task="{task_id}"):
            if i == 40:
                raise ValueError("row 40 has no date")
    """)
    assert result.returncode == 1 and "ValueError: row 40 has no date" in result.stderr
    task = live.task(task_id)
    assert (task["state"], task["detail"], task["completed"]) == ("failed", "ValueError: row 40 has no date", 40)


def test_a_loop_left_by_break_or_a_caught_exception_ends_done(live, task_id):
    result = live.run_python(f"""
        from ringcast.tqdm import tqdm
        for i in tqdm(range(100), ringcast_task="{task_id}-break"):
            if i == 30:
                break
        try:
            for i in tqdm(range(100), ringcast_task="{task_id}-caught"):
                if i == 20:
                    raise KeyError("handled")
        except KeyError:
            pass
    """)
    assert result.returncode == 0, result.stderr
    assert live.task(task_id + "-break")["state"] == "done"
    assert live.task(task_id + "-caught")["state"] == "done"


def test_a_with_block_tells_the_bar_why_its_loop_ended(rc, live, task_id):
    with pytest.raises(RuntimeError), bridge.tqdm(range(10), file=io.StringIO(), ringcast_task=task_id, ringcast_client=rc) as bar:
        for i in bar:
            if i == 3:
                raise RuntimeError("out of memory")
    rc.flush()
    assert (live.task(task_id)["state"], live.task(task_id)["detail"]) == ("failed", "RuntimeError: out of memory")


def test_keyboard_interrupt_ends_the_task_cancelled(live, task_id):
    result = live.run_python(f"""
        from ringcast.tqdm import tqdm
        for i in tqdm(range(100), ringcast_task="{task_id}"):
            if i == 10:
                raise KeyboardInterrupt
    """)
    assert result.returncode != 0
    assert live.task(task_id)["state"] == "cancelled"


def test_wrap_mirrors_a_bar_made_elsewhere(rc, live, task_id):
    bar = tqdm_package.tqdm(range(64), desc="download", file=io.StringIO())
    assert bridge.wrap(bar, task=task_id, client=rc) is bar
    assert bridge.wrap(bar, task=task_id, client=rc) is bar  # once is enough
    for _ in bar:
        pass
    rc.flush()
    task = live.task(task_id)
    assert (task["state"], task["completed"], task["total"], task["title"]) == ("done", 64, 64, "download")


def test_a_pause_holds_the_loop_until_a_cancel_ends_it(rc, live, task_id):
    outcome = {}
    bar = bridge.tqdm(range(10**7), file=io.StringIO(), mininterval=0.01, ringcast_task=task_id, ringcast_client=rc)

    def work():
        try:
            for _ in bar:
                threading.Event().wait(0.0005)
        except ringcast.Cancelled:
            outcome["cancelled"] = True

    worker = threading.Thread(target=work)
    worker.start()
    try:
        live.wait_task(task_id, lambda t: t["state"] == "running" and t["completed"] > 0)
        live.post(f"/api/tasks/{task_id}/pause")
        paused = live.wait_task(task_id, lambda t: t["state"] == "paused")
        # The loop is held inside tqdm's update, where the pause was published with its count.
        assert paused["completed"] == bar.n
        assert worker.is_alive()
        live.post(f"/api/tasks/{task_id}/cancel")
        worker.join(15)
    finally:
        if worker.is_alive():
            live.post(f"/api/tasks/{task_id}/cancel", ok=(200, 409))
            worker.join(15)
    assert outcome == {"cancelled": True}
    rc.flush()
    assert live.task(task_id)["state"] == "cancelled"
    assert wait_for(lambda: not bridge._all_open or all(m.ended for m in bridge._all_open))
