"""The two exceptions the package raises."""

from __future__ import annotations


class RingcastError(Exception):
    """What the server (or the client, checking with the server's rules before sending) refused,
    or why it could not be reached.

    `error` is the server's code (`invalid_field`, `not_found`, `unauthorized`, …, or the client's
    own `timeout`, `closed`, `unreachable`), `message` says what was wrong and what to do, `field`
    names the offending field (or None), `id` the task the refused event named (or None) and
    `status` the HTTP status when the answer came over HTTP."""

    def __init__(
        self,
        error: str,
        message: str,
        field: str | None = None,
        id: str | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(error, message, field)
        self.error = error
        self.message = message
        self.field = field
        self.id = id
        self.status = status

    def __str__(self) -> str:
        where = f" (field {self.field})" if self.field else ""
        task = f"task {self.id}: " if self.id else ""
        return f"{task}{self.error}: {self.message}{where}"

    def __repr__(self) -> str:
        return f"RingcastError(error={self.error!r}, message={self.message!r}, field={self.field!r}, id={self.id!r})"

    @classmethod
    def from_answer(cls, body: object, status: int | None = None, id: str | None = None) -> RingcastError:
        """The error body the server sends (`{"error", "message", "field"}`), or a stand-in for a
        body that is not one."""
        if isinstance(body, dict) and isinstance(body.get("error"), str):
            field = body.get("field")
            task = body.get("id") if isinstance(body.get("id"), str) else id
            return cls(body["error"], str(body.get("message", "")), field if isinstance(field, str) else None, task, status)
        return cls("unexpected_answer", f"the server answered HTTP {status}: {str(body)[:300]}", None, id, status)


class Cancelled(BaseException):
    """Raised in the thread that works on a task when the dashboard (or the API's
    `POST /api/tasks/{id}/cancel`) asked to cancel it; the task then ends `cancelled`.

    A BaseException, as KeyboardInterrupt and asyncio's CancelledError are, so that an
    `except Exception:` around the work does not swallow the request."""

    def __init__(self, id: str) -> None:
        super().__init__(f"task {id} was cancelled from the dashboard")
        self.id = id
