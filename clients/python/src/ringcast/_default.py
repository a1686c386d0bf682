"""Where the process's default client comes from, below every module that needs one: the log
handler and the tqdm bridge ask here, and `client` registers how to make one when it is imported.
The handler sits under `task`, which sits under `client`, so asking `client` itself would close an
import cycle."""

from __future__ import annotations

from typing import Any, Callable

_make: Callable[[], Any] | None = None


def register(make: Callable[[], Any]) -> None:
    """Called once, by `ringcast.client` as it is imported."""
    global _make
    _make = make


def default_client() -> Any:
    """The process's default client (`ringcast.client.default_client`)."""
    # Importing any module of the package imports `ringcast/__init__`, and so `client`, first.
    assert _make is not None, "ringcast.client registers the default client when the package is imported"
    return _make()
