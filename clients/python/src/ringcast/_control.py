"""What the dashboard asked of one task, and how the code doing the work hears it.

The publisher thread records a request the moment its `control` frame arrives; the worker sees it
at its next checkpoint (each update of the task): a cancel raises Cancelled there (or, when the
caller gave `on_cancel`, that callback has already been called on a thread of its own), a pause
publishes `paused` and blocks until a resume (publishing `running`) or a cancel."""

from __future__ import annotations

import threading
from typing import Callable

from ._errors import Cancelled

OFFERED = ["cancel", "pause", "resume"]


class ControlState:
    def __init__(self, id: str, on_cancel: Callable[[], None] | None = None) -> None:
        self.id = id
        self.on_cancel = on_cancel
        self._changed = threading.Condition()
        self.cancel_requested = False
        self.pause_requested = False
        # Set once the worker has been told (Cancelled raised): the task then ends cancelled.
        self.cancel_raised = False

    def handle(self, action: str) -> None:
        """On the publisher thread: records the request (keep it short)."""
        callback = None
        with self._changed:
            if action == "cancel" and not self.cancel_requested:
                self.cancel_requested = True
                callback = self.on_cancel
            elif action == "pause":
                self.pause_requested = True
            elif action == "resume":
                self.pause_requested = False
            self._changed.notify_all()
        if callback is not None:
            threading.Thread(target=callback, name=f"ringcast-cancel-{self.id}", daemon=True).start()

    @property
    def pending(self) -> bool:
        """Cheap: whether the worker has anything to hear at its checkpoint."""
        return (self.cancel_requested and not self.cancel_raised and self.on_cancel is None) or self.pause_requested

    def checkpoint(self, publish_state: Callable[[str], None]) -> None:
        """In the worker's thread: raises Cancelled for a cancel, blocks through a pause."""
        if self.pause_requested and not self.cancel_requested:
            publish_state("paused")
            self.wait_while_paused()
            if not self.cancel_requested:
                publish_state("running")
        self.raise_if_cancelled()

    def wait_while_paused(self) -> None:
        with self._changed:
            while self.pause_requested and not self.cancel_requested:
                self._changed.wait()

    def raise_if_cancelled(self) -> None:
        if self.cancel_requested and self.on_cancel is None and not self.cancel_raised:
            self.cancel_raised = True
            raise Cancelled(self.id)
