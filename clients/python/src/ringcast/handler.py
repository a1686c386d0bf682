"""A logging.Handler that ships records to a task's log tail."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ._default import default_client

if TYPE_CHECKING:
    from .client import Ringcast


class LogHandler(logging.Handler):
    """Sends each record, formatted, to the log tail of task `task` (`GET /api/tasks/{id}/log`
    reads it back; the dashboard shows it under the task). The lines go with the client's other
    events: queued, merged into one log event per task while they wait, never dropped.

    The task is created (an empty update) if it does not exist yet. Records of the `ringcast`
    logger itself are not shipped, so a handler on the root logger cannot feed itself.

        logging.getLogger("etl").addHandler(ringcast.LogHandler("etl.import"))
    """

    def __init__(self, task: str, client: Ringcast | None = None, level: int = logging.NOTSET) -> None:
        super().__init__(level)
        self.task = task
        self._client = client
        self._created = False

    @property
    def client(self) -> Ringcast:
        if self._client is None:
            self._client = default_client()
        return self._client

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "ringcast" or record.name.startswith("ringcast."):
            return
        try:
            text = self.format(record)
            if not self._created:
                self.client.update(self.task)
                self._created = True
            self.client.log(self.task, text)
        except Exception:
            self.handleError(record)
