"""What the publisher decides: merging under a tight loop, never merging away what matters, and
catching up after the server restarts."""

from __future__ import annotations

import time

from conftest import Live, wait_for
from harness import Server

from ringcast import Ringcast


def test_a_100000_iteration_loop_sends_a_bounded_number_of_messages_and_the_exact_last_value(live, task_id):
    client = Ringcast(live.url)
    try:
        client.update(task_id, title="Tight loop")
        client.flush()
        before = live.metric("ringcast_client_messages_total")
        sent_before = client.stats.as_dict()
        started = time.monotonic()
        for i in range(100_000):
            client.update(task_id, completed=i + 1, total=100_000)
        client.flush()
        elapsed = time.monotonic() - started
        stats = client.stats.as_dict()
        frames = stats["frames"] - sent_before["frames"]
        markers = stats["markers"] - sent_before["markers"]
        # Frames of plain progress leave at most every send_interval; the flush adds one more.
        assert frames <= elapsed / client.publisher.send_interval + 2
        assert frames < 1000
        assert stats["sent"] - sent_before["sent"] == frames  # one event a frame: each is the task's latest
        assert stats["coalesced"] - sent_before["coalesced"] == 100_000 - frames
        # The server received exactly what the client says it sent: event frames and flush markers.
        assert live.metric("ringcast_client_messages_total") - before == frames + markers
        task = live.task(task_id)
        assert (task["completed"], task["total"], task["progress"]) == (100_000, 100_000, 1)
    finally:
        client.close()


def test_states_shows_hides_and_log_lines_are_never_merged_away(live, task_id):
    watcher_events = []
    import json

    from ringcast._websocket import WebSocket

    port = int(live.url.rsplit(":", 1)[1])
    watcher = WebSocket.connect("127.0.0.1", port, f"/ws?watch={task_id}", secure=False, headers=[], timeout=5)
    client = Ringcast(live.url)
    try:
        client.update(task_id, title="Never merged away")
        client.flush()
        for round in range(3):
            for i in range(200):
                client.update(task_id, progress=i / 200)
            client.update(task_id, state="paused")
            client.update(task_id, state="running")
            client.log(task_id, [f"round {round}"])
            client.hide(task_id)
            client.show(task_id)
        client.update(task_id, state="done")
        client.flush()

        import select

        def collect():
            while True:
                readable = bool(select.select([watcher], [], [], 0.05)[0])
                if not (readable or watcher.has_buffered()):
                    break
                for text in watcher.receive(readable):
                    message = json.loads(text)
                    watcher_events.extend(message if isinstance(message, list) else [message])
            return any(e.get("type") == "state" and e.get("state") == "done" for e in watcher_events)

        wait_for(collect, message="the watcher did not see the task end")
        kinds = [(e["type"], e.get("state")) for e in watcher_events if e.get("id") == task_id and e["type"] != "progress"]
        per_round = [("state", "paused"), ("state", "running"), ("log", "running"), ("hide", "running"), ("show", "running")]
        assert kinds[-16:] == per_round * 3 + [("state", "done")]
        assert client.read_log(task_id)["lines"] == ["round 0", "round 1", "round 2"]
    finally:
        client.close()
        watcher.close()


def test_flush_returns_once_the_restarted_server_has_kept_what_was_queued_while_it_was_down(tmp_path, task_id):
    server = Server(storage=tmp_path / "ringcast.db", heartbeat=1)
    server.start()
    live = Live(server)
    client = Ringcast(live.url, timeout=5)
    try:
        client.update(task_id, title="Across a restart", completed=1, total=1000)
        client.flush()
        port = server.port
        server.stop()
        wait_for(lambda: not client.connected, message="the client did not notice the server stopped")
        # While the server is down: a loop of updates (merged into the latest) and a state change.
        for i in range(2, 1001):
            client.update(task_id, completed=i)
        client.update(task_id, detail="all rows")
        client.log(task_id, "written while the server was down")
        server.start(port=port)
        client.flush(timeout=30)
        task = live.task(task_id)
        assert (task["completed"], task["detail"]) == (1000, "all rows")
        assert client.read_log(task_id)["lines"] == ["written while the server was down"]
        client.update(task_id, state="done")
        client.flush(timeout=30)
        # Kept means kept: the server's storage has it after another restart.
        server.stop()
        server.start(port=port)
        assert live.task(task_id)["state"] == "done"
        assert client.stats.connections >= 2
    finally:
        client.close(timeout=5)
        server.stop()
