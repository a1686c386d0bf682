"""The publisher: one background thread that owns one WebSocket (`/ws?mode=publish`) and sends
what the calls queue.

Why a WebSocket and not HTTP: the server pushes a dashboard's cancel and pause requests only to
the sockets that publish a task (a `control` frame, the moment it is asked), it stalls a leased
task at once when that socket closes (a killed process shows `stalled` without waiting for the
lease), and `flush`/`flushed` says when what was sent is kept. HTTP would need polling for all
three.

The queue merges: an update to a task that already has an update waiting is folded into it
(the newest value of each field wins), so a loop of 100 000 updates sends a few dozen events.
States, shows, hides, timers, removals and controls are never merged away; log lines are
appended to a waiting log event of the same task. Frames leave at most every `send_interval`
unless something urgent (a state, a show or hide, a flush) waits.

What was written stays held until the server's `flushed` covers it; the thread sends such a
marker behind its writes by itself (one at a time, at most every `ack_interval`; at once while
someone waits in flush()). A
connection that dies puts what it had not had acknowledged back at the front of the queue, so
after a reconnect the server has the latest state of every task, and a waiting flush() returns
once that is kept.

Threads: every `_`-attribute below the lock is guarded by `_lock` (calls come from any thread);
the WebSocket, `_marker_ref` and `_markers` belong to the publisher thread."""

from __future__ import annotations

import collections
import contextlib
import heapq
import itertools
import json
import logging
import random
import re
import select
import socket
import threading
import time
from typing import Any, Callable

from ._endpoint import Endpoint
from ._errors import RingcastError
from ._websocket import HandshakeRefused, ProtocolViolation, WebSocket

log = logging.getLogger("ringcast")

_SIGNIFICANT = frozenset(("state", "visible", "modal", "hideAfter"))
_MERGE_UPDATE = 1
_MERGE_LOG = 2

MAX_DEPTH = 100
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_DEPTH_STEP = [0] * 256
_DEPTH_STEP[ord("[")] = _DEPTH_STEP[ord("{")] = 1
_DEPTH_STEP[ord("]")] = _DEPTH_STEP[ord("}")] = -1


def decode_message(text: str) -> Any:
    """The JSON of one message from the server. Nesting deeper than MAX_DEPTH is refused before
    parsing (ProtocolViolation, 1009): the parser recurses, and a message nested 200 000 deep
    raised RecursionError on every connection. Raises ValueError for text that is not JSON."""
    if text.count("[") + text.count("{") > MAX_DEPTH:
        # Brackets inside strings do not nest; the count runs in C (bytes, as brackets are ASCII
        # and never part of a longer UTF-8 sequence).
        bare = _STRING.sub("", text).encode("utf-8", "surrogatepass")
        if max(itertools.accumulate(map(_DEPTH_STEP.__getitem__, bare)), default=0) > MAX_DEPTH:
            raise ProtocolViolation(1009, f"the server sent JSON nested deeper than {MAX_DEPTH} levels (the client's limit)")
    return json.loads(text)


class Slot:
    """One event waiting to be sent (or written and waiting to be acknowledged)."""

    __slots__ = ("type", "id", "fields", "seq", "merge", "urgent")

    def __init__(self, type: str, id: str, fields: dict[str, Any], seq: int, merge: int, urgent: bool) -> None:
        self.type = type
        self.id = id
        self.fields = fields
        self.seq = seq
        self.merge = merge
        self.urgent = urgent

    def wire(self) -> dict[str, Any]:
        event = {"type": self.type, "id": self.id}
        event.update(self.fields)
        return event


class Statistics:
    """What the publisher did: `accepted` events from calls, `coalesced` of them folded into one
    already waiting, `sent` events written, `frames` WebSocket messages of events, `markers`
    flush markers, `connections` made."""

    __slots__ = ("accepted", "coalesced", "sent", "frames", "markers", "connections")

    def __init__(self) -> None:
        self.accepted = self.coalesced = self.sent = self.frames = self.markers = self.connections = 0

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__}

    def __repr__(self) -> str:
        return "Statistics(" + ", ".join(f"{k}={v}" for k, v in self.as_dict().items()) + ")"


ControlHandler = Callable[[str], None]


class Publisher:
    def __init__(
        self,
        endpoint: Endpoint,
        token: str | None,
        *,
        send_interval: float,
        queue_limit: int,
        connect_timeout: float,
        on_error: Callable[[RingcastError], None] | None,
        on_control: Callable[[str, str], None] | None,
    ) -> None:
        self.endpoint = endpoint
        self.send_interval = send_interval
        # Seconds between the markers the thread sends by itself: each brings an answer the thread
        # must wake for, and in a loop that holds the GIL every wake costs the loop a switch.
        self.ack_interval = 0.5
        self.queue_limit = queue_limit
        self.connect_timeout = connect_timeout
        self.on_error = on_error
        self.on_control = on_control
        self._headers = [("Authorization", f"Bearer {token}")] if token else []
        self.stats = Statistics()
        self.errors: collections.deque[RingcastError] = collections.deque(maxlen=256)

        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._queue: collections.deque[Slot] = collections.deque()
        self._open: dict[str, Slot] = {}
        self._unacked: collections.deque[Slot] = collections.deque()
        self._seq = itertools.count()
        self._last_seq = -1
        self._acked_through = -1
        self._last_written = -1
        self._urgent = False
        self._flushers = 0
        self._state = "connecting"
        self._ever_connected = False
        self._problem: str | None = None
        self._unraised: list[RingcastError] = []
        self._leases: dict[str, float] = {}
        self._last_sent: dict[str, float] = {}
        self._controls: dict[str, tuple[list[str], ControlHandler]] = {}
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._timer_ids = itertools.count()
        self._wake_pending = False
        self._last_write = 0.0
        self._acknowledges = True
        self._failed_attempts = 0

        self._wake_reader, self._wake_writer = socket.socketpair()
        self._wake_reader.setblocking(False)
        self._marker_ref = -1
        self._markers = 0
        self._marker_time = 0.0
        self._thread = threading.Thread(target=self._run, name="ringcast-publisher", daemon=True)
        self._thread.start()

    # MARK: calls (any thread)

    def enqueue(self, type: str, id: str, fields: dict[str, Any], *, force: bool = False, block: bool = True) -> bool:
        """Queues an event (checked already), merging it into one waiting for the same task where
        the rules allow. While `queue_limit` distinct events wait it waits for room (`block`), or
        returns False at once; `force` queues past the limit."""
        significant = type == "update" and not _SIGNIFICANT.isdisjoint(fields)
        controls_only = type == "update" and "controls" in fields
        merge = _MERGE_LOG if type == "log" else (_MERGE_UPDATE if type == "update" and not controls_only else 0)
        urgent = significant or type not in ("update", "log")
        with self._lock:
            if self._state in ("closing", "closed"):
                raise RingcastError("closed", "the client is closed: make a new Ringcast to publish again", id=id)
            waiting = self._open.get(id)
            if waiting is not None and waiting.merge == merge and merge and self._fold(waiting, fields, significant):
                self.stats.accepted += 1
                self.stats.coalesced += 1
                if significant:
                    waiting.urgent = True
                    del self._open[id]
                    self._urgent = True
                    self._wake()
                return True
            while not force and len(self._queue) >= self.queue_limit:
                if not block:
                    return False
                if self._state in ("closing", "closed"):
                    raise RingcastError("closed", "the client closed while this call waited for room in its queue", id=id)
                self._changed.wait(1.0)
            seq = next(self._seq)
            slot = Slot(type, id, dict(fields), seq, merge if not significant else 0, urgent)
            was_empty = not self._queue
            self._queue.append(slot)
            self._last_seq = seq
            self.stats.accepted += 1
            if slot.merge:
                self._open[id] = slot
            else:
                self._open.pop(id, None)
            if urgent:
                self._urgent = True
            if urgent or was_empty:
                self._wake()
        return True

    @staticmethod
    def _fold(waiting: Slot, fields: dict[str, Any], significant: bool) -> bool:
        """Folds `fields` into the waiting event; False when it cannot take them."""
        if waiting.merge == _MERGE_LOG:
            lines = waiting.fields["lines"]
            if len(lines) + len(fields["lines"]) > 10000:
                return False
            lines.extend(fields["lines"])
            return True
        target = waiting.fields
        # Counts without a fraction make the server derive the fraction: an older fraction must not win.
        if ("completed" in fields or "total" in fields) and "progress" not in fields:
            target.pop("progress", None)
        target.update(fields)
        if significant:
            waiting.merge = 0
        return True

    def flush(self, timeout: float | None, unless_unreached: bool = False) -> None:
        """Returns once the server has acknowledged as kept everything queued before the call;
        raises the first refusal the server reported since the last flush, or `timeout`. With
        `unless_unreached`, gives up (`unreachable`) as soon as a first attempt to connect failed
        and none ever succeeded: at exit, a program without a server is not held up."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            target = self._last_seq
            if target > self._acked_through:
                if self._state == "closed":
                    raise RingcastError("closed", "the client is closed: what was queued and not acknowledged is lost")
                self._flushers += 1
                self._urgent = True
                self._wake()
                try:
                    while self._acked_through < target:
                        if self._state == "closed":
                            raise RingcastError("closed", "the client closed before the server acknowledged what was queued")
                        if unless_unreached and not self._ever_connected and self._failed_attempts:
                            raise RingcastError("unreachable", self._problem or f"{self.endpoint.url} was never reached")
                        remaining = None if deadline is None else deadline - time.monotonic()
                        if remaining is not None and remaining <= 0:
                            raise RingcastError(
                                "timeout",
                                f"the server at {self.endpoint.url} did not acknowledge within {timeout:g} s"
                                + (f" ({self._problem})" if self._problem else "")
                                + "; the client keeps what is queued and goes on trying")
                        self._changed.wait(remaining if remaining is not None else 1.0)
                finally:
                    self._flushers -= 1
            refused, self._unraised = self._unraised, []
        if refused:
            raise refused[0]

    def lease(self, id: str, seconds: float | None) -> None:
        """Keeps renewing task `id`'s lease every third of `seconds` while the client runs (None stops)."""
        with self._lock:
            if seconds is None:
                self._leases.pop(id, None)
            else:
                self._leases[id] = seconds
                self._wake()

    def offer_controls(self, id: str, actions: list[str], handler: ControlHandler) -> None:
        """Routes control requests for `id` to `handler` (on the publisher thread: keep it short)
        and queues the event that offers them."""
        with self._lock:
            self._controls[id] = (list(actions), handler)
        self.enqueue("update", id, {"controls": list(actions)}, force=True)

    def withdraw_controls(self, id: str, handler: ControlHandler) -> None:
        with self._lock:
            current = self._controls.get(id)
            if current is not None and current[1] is handler:
                del self._controls[id]

    def call_later(self, delay: float, action: Callable[[], None]) -> None:
        """Runs `action` on the publisher thread after `delay` seconds (while the client runs)."""
        with self._lock:
            heapq.heappush(self._timers, (time.monotonic() + delay, next(self._timer_ids), action))
            self._wake()

    @property
    def ever_connected(self) -> bool:
        with self._lock:
            return self._ever_connected

    @property
    def connected(self) -> bool:
        with self._lock:
            return self._state == "open"

    @property
    def problem(self) -> str | None:
        with self._lock:
            return self._problem

    @property
    def has_room(self) -> bool:
        """Whether a call would queue without waiting (fewer than `queue_limit` distinct events wait)."""
        with self._lock:
            return len(self._queue) < self.queue_limit

    @property
    def pending(self) -> bool:
        """Whether anything queued is not yet acknowledged."""
        with self._lock:
            return self._last_seq > self._acked_through

    def close(self, timeout: float) -> None:
        """Stops the thread (after the caller has flushed what it wanted kept)."""
        with self._lock:
            if self._state == "closed":
                return
            self._state = "closing"
            self._wake()
            self._changed.notify_all()
        self._thread.join(timeout)
        with self._lock:
            self._state = "closed"
            self._changed.notify_all()

    def abandon_after_fork(self) -> None:
        """In a forked child: the thread did not come along, and the socket is the parent's. Close
        our copy of its descriptor without a close frame, so the parent's connection lives on."""
        self._state = "closed"

    # MARK: the publisher thread

    def _wake(self) -> None:
        """Under the lock: makes the thread look at the queue now."""
        if not self._wake_pending:
            self._wake_pending = True
            with contextlib.suppress(OSError):
                self._wake_writer.send(b"\0")

    def _run(self) -> None:
        attempt = 0
        while True:
            healthy = True
            with self._lock:
                if self._state in ("closing", "closed"):
                    break
                self._state = "connecting"
            try:
                ws = WebSocket.connect(
                    self.endpoint.host, self.endpoint.port, self.endpoint.path("/ws?mode=publish"),
                    secure=self.endpoint.secure, headers=self._headers, timeout=self.connect_timeout,
                    ssl_context=self.endpoint.ssl_context, proxy=self.endpoint.proxy)
            except HandshakeRefused as refused:
                try:
                    error = RingcastError.from_answer(json.loads(refused.body), refused.status)
                except ValueError:
                    error = RingcastError("refused", str(refused), status=refused.status)
                self._lost(f"the server refused the connection: {error}", error if attempt == 0 else None)
            except OSError as failure:
                self._lost(f"could not connect to {self.endpoint.url}: {failure}")
            except Exception:
                log.exception("ringcast: connecting failed unexpectedly")
                self._lost("connecting failed unexpectedly (logged)")
            else:
                if self._serve(ws):
                    attempt = 0
                else:
                    healthy = False
            with self._lock:
                if self._state in ("closing", "closed"):
                    break
                self._state = "waiting"
            ceiling = min(10.0, 0.25 * 2 ** min(attempt, 10))
            # Full jitter; after a connection that opened and did not serve (closed before its
            # hello, broke the protocol) at least half the ceiling, so a server that fails every
            # connection at once cannot draw a run of near-zero waits: its reconnect rate falls
            # off as the ceiling grows.
            delay = random.uniform(0 if healthy else ceiling / 2, ceiling)
            attempt += 1
            self._idle(delay)
        with self._lock:
            self._state = "closed"
            self._changed.notify_all()

    def _idle(self, seconds: float) -> None:
        """Waits between connection attempts, running due timers; returns early when closing."""
        deadline = time.monotonic() + seconds
        while True:
            now = time.monotonic()
            self._run_timers(now)
            with self._lock:
                if self._state in ("closing", "closed"):
                    return
                wait = deadline - now
                if self._timers:
                    wait = min(wait, self._timers[0][0] - now)
            if deadline - now <= 0:
                return
            select.select([self._wake_reader], [], [], max(0.0, wait))
            self._drain_wake()

    def _drain_wake(self) -> None:
        with self._lock:
            self._wake_pending = False
        try:
            while self._wake_reader.recv(4096):
                pass
        except OSError:
            pass

    def _lost(self, problem: str, error: RingcastError | None = None) -> None:
        """The connection failed or closed: what it held unacknowledged goes back to the queue."""
        with self._lock:
            self._failed_attempts += 1
            if self._problem != problem:
                log.debug("ringcast: %s", problem)
            self._problem = problem
            self._queue.extendleft(reversed(self._unacked))
            self._unacked.clear()
            self._changed.notify_all()
        if error is not None:
            self._report(error)

    def _report(self, error: RingcastError, raise_in_flush: bool = True) -> None:
        with self._lock:
            self.errors.append(error)
            if raise_in_flush:
                self._unraised.append(error)
        if self.on_error is not None:
            try:
                self.on_error(error)
            except Exception:
                log.exception("ringcast: the on_error callback raised")

    def _serve(self, ws: WebSocket) -> bool:
        """Runs one connection until it fails or the client closes; True when it was greeted and
        the server kept to the protocol (the back-off then starts over)."""
        self._marker_ref = -1
        self._markers = 0
        self._marker_time = 0.0
        greeted = False
        silence_limit = self.connect_timeout
        last_heard = time.monotonic()
        try:
            while True:
                now = time.monotonic()
                with self._lock:
                    closing = self._state == "closing"
                    timeout = self._timeout(now, greeted)
                if closing:
                    ws.close(1000)
                    return greeted
                if ws.has_buffered():
                    timeout = 0.0
                readable, _, _ = select.select([ws, self._wake_reader], [], [], timeout)
                if self._wake_reader in readable:
                    self._drain_wake()
                if ws in readable or ws.has_buffered():
                    for text in ws.receive(readable=ws in readable or ws.tls_pending()):
                        last_heard = time.monotonic()
                        heartbeat = self._handle(text, greeted)
                        if heartbeat is not None and not greeted:
                            greeted = True
                            silence_limit = 2 * heartbeat + 2
                now = time.monotonic()
                if greeted:
                    self._renew_leases(now)
                    self._write(ws, now)
                self._run_timers(now)
                if now - last_heard > silence_limit:
                    raise OSError(f"nothing came from the server for {silence_limit:g} s")
        except ProtocolViolation as violation:
            # Not a healthy connection, whatever it said first: the back-off goes on growing.
            ws.close(violation.code)
            problem = f"the server at {self.endpoint.url} broke the protocol: {violation.reason}; closed with {violation.code}"
            self._lost(problem)
            log.warning("ringcast: %s", problem)
            self._report(RingcastError(
                "protocol_violation",
                f"{problem}, and reconnecting with back-off. Is {self.endpoint.url} a Ringcast server (or a proxy in front of one)?"),
                raise_in_flush=False)
            return False
        except OSError as failure:
            ws.close(1001)
            self._lost(f"the connection to {self.endpoint.url} failed: {failure}")
            return greeted
        except Exception:
            # A bug of ours must not end publishing: log it, and start over on a new connection.
            log.exception("ringcast: the publisher thread failed; reconnecting")
            ws.close(1011)
            self._lost("the publisher thread failed unexpectedly (logged)")
            return greeted

    def _timeout(self, now: float, greeted: bool) -> float:
        """Under the lock: how long the thread may wait for the socket."""
        wait = 1.0
        if greeted and self._queue:
            wait = 0.0 if self._urgent else max(0.0, self._last_write + self.send_interval - now)
        elif greeted and self._last_written > self._marker_ref:
            # A marker is owed: at once for a flush() waiting, else when the interval is up.
            wait = 0.0 if self._flushers else max(0.0, self._marker_time + self.ack_interval - now)
        if self._leases:
            wait = min(wait, min(self._leases.values()) / 3)
        if self._timers:
            wait = min(wait, max(0.0, self._timers[0][0] - now))
        return wait

    def _handle(self, text: str, greeted: bool) -> float | None:
        """One message from the server; returns the heartbeat interval when it is the `hello`."""
        try:
            message = decode_message(text)
        except ValueError:
            return None
        for event in message if isinstance(message, list) else [message]:
            if not isinstance(event, dict):
                continue
            kind = event.get("type")
            if kind == "hello" and not greeted:
                version = event.get("protocol")
                self._greeted(isinstance(version, int) and version >= 2)
                heartbeat = event.get("heartbeat")
                return float(heartbeat) if isinstance(heartbeat, (int, float)) and heartbeat > 0 else 15.0
            if kind == "flushed":
                self._acknowledged(event.get("ref"))
            elif kind == "control":
                self._control(event.get("id"), event.get("action"))
            elif kind == "error":
                self._report(RingcastError.from_answer(event))
        return None

    def _greeted(self, acknowledges: bool) -> None:
        with self._lock:
            self._acknowledges = acknowledges
            self._state = "open"
            self._problem = None
            self._ever_connected = True
            self.stats.connections += 1
            again = self.stats.connections > 1
            offers = [(id, actions) for id, (actions, _) in self._controls.items()] if again else []
            self._urgent = True
        # A new connection (the server may have restarted): say again which tasks take requests,
        # so the server routes them to this socket.
        for id, actions in offers:
            try:
                self.enqueue("update", id, {"controls": actions}, force=True)
            except RingcastError:
                return

    def _acknowledged(self, ref: object) -> None:
        if not isinstance(ref, str) or not ref.lstrip("-").isdigit():
            return
        covered = int(ref)
        self._markers = max(0, self._markers - 1)
        with self._lock:
            if covered > self._acked_through:
                self._acked_through = covered
            while self._unacked and self._unacked[0].seq <= covered:
                self._unacked.popleft()
            self._changed.notify_all()

    def _control(self, id: object, action: object) -> None:
        if not isinstance(id, str) or action not in ("cancel", "pause", "resume"):
            return
        with self._lock:
            entry = self._controls.get(id)
        try:
            if entry is not None:
                entry[1](action)  # type: ignore[arg-type]
            elif self.on_control is not None:
                self.on_control(id, action)  # type: ignore[arg-type]
        except Exception:
            log.exception("ringcast: the handler of a %s request for %s raised", action, id)

    def _renew_leases(self, now: float) -> None:
        with self._lock:
            due = [id for id, seconds in self._leases.items() if now - self._last_sent.get(id, 0.0) >= seconds / 3]
            for id in due:
                # Marked as sent now, so a renewal waiting in the queue is not queued again.
                self._last_sent[id] = now
        for id in due:
            try:
                self.enqueue("update", id, {}, force=True)
            except RingcastError:
                return

    def _write(self, ws: WebSocket, now: float) -> None:
        """Writes what is due: a frame of waiting events (up to 1 000, about 256 KiB), then a flush
        marker when none is out, or someone waits in flush()."""
        while True:
            with self._lock:
                if not self._queue or not (self._urgent or self._flushers or now >= self._last_write + self.send_interval):
                    break
                taken: list[Slot] = []
                size = 0
                while self._queue and len(taken) < 1000 and size < 256 * 1024:
                    slot = self._queue.popleft()
                    if self._open.get(slot.id) is slot:
                        del self._open[slot.id]
                    taken.append(slot)
                    size += 64 + len(slot.fields) * 24
                self._last_written = taken[-1].seq
                if self._acknowledges:
                    self._unacked.extend(taken)
                else:
                    # A protocol 1 server has no acknowledgement: written is all it gives.
                    self._acked_through = self._last_written
                for slot in taken:
                    self._last_sent[slot.id] = now
                self._urgent = any(slot.urgent for slot in self._queue) if self._queue else False
                self._last_write = now
                self.stats.sent += len(taken)
                self.stats.frames += 1
                self._changed.notify_all()
            events = [slot.wire() for slot in taken]
            body = events[0] if len(events) == 1 else events
            ws.send_text(json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8"))
        with self._lock:
            wanted = self._acknowledges and self._last_written > self._marker_ref and (
                self._flushers > 0 or (self._markers == 0 and now >= self._marker_time + self.ack_interval))
            ref = self._last_written
            if wanted:
                self.stats.markers += 1
        if wanted:
            ws.send_text(b'{"type":"flush","ref":"%d"}' % ref)
            self._marker_ref = ref
            self._markers += 1
            self._marker_time = now

    def _run_timers(self, now: float) -> None:
        while True:
            with self._lock:
                if not self._timers or self._timers[0][0] > now:
                    return
                _, _, action = heapq.heappop(self._timers)
            try:
                action()
            except Exception:
                log.exception("ringcast: a scheduled action raised")
