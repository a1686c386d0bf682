"""Ringcast's Python client: live progress from where the work runs.

    from ringcast import Ringcast
    rc = Ringcast()                                   # RINGCAST_URL, RINGCAST_TOKEN
    rc.update("etl.import", completed=42, total=100, title="Import")
    with rc.task("etl.run", title="Nightly ETL", total=3) as task:
        task.advance()

`ringcast.tqdm` mirrors tqdm bars, `ringcast.LogHandler` ships log records to a task's log,
`ringcast.aio.AsyncRingcast` is the same client for asyncio. docs/PYTHON-CLIENT.md has the rest."""

from ._errors import Cancelled, RingcastError
from ._fields import UNSET
from ._publisher import Statistics
from .aio import AsyncRingcast, AsyncTask
from .client import Ringcast, default_client
from .handler import LogHandler
from .task import Task

__version__ = "0.2.0"

__all__ = ["AsyncRingcast", "AsyncTask", "Cancelled", "LogHandler", "Ringcast", "RingcastError", "Statistics", "Task", "UNSET", "default_client", "__version__"]

