"""Events as the wire spells them, checked with the server's own rules (docs/PROTOCOL.md, Merge
rules) before they are queued: a value the server would refuse raises RingcastError at the call,
with the code, message and field the server would have sent, and nothing is sent."""

from __future__ import annotations

import math
import numbers
import re
from typing import Any, Union

from ._errors import RingcastError


class _Unset:
    """The default of every optional argument: "leave it as it is". None, by contrast, is sent as
    JSON null, which clears a field (or makes progress indeterminate)."""

    _instance: _Unset | None = None

    def __new__(cls) -> _Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Any = _Unset()

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
MAX_UNITS = 9007199254740992
MAX_SECONDS = 31536000
STATES = ("running", "paused", "done", "failed", "cancelled")
CONTROLS = ("cancel", "pause", "resume")
MAX_LOG_LINES = 10000

Number = Union[int, float]


def is_valid_id(text: object) -> bool:
    return isinstance(text, str) and _ID.match(text) is not None


def check_id(id: object, field: str = "id") -> str:
    if not is_valid_id(id):
        shown = str(id)[:140]
        raise RingcastError(
            "invalid_id",
            f"task id '{shown}' is not valid: 1–128 letters, digits, '.', '_' or '-', starting with a letter or digit",
            field, id if isinstance(id, str) else None)
    return id  # type: ignore[return-value]


def _number(name: str, value: object, low: float, high: float, hint: str, low_open: bool = False) -> Number:
    kind = type(value)
    # The common case, without the ABC checks below (this runs in the caller's loop).
    if (kind is int or kind is float) and (low < value <= high or (value == low and not low_open)):  # type: ignore[operator]
        return value  # type: ignore[return-value]
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise RingcastError("invalid_field", f"{name} must be a number, not {type(value).__name__} ({hint})", name)
    number: Number = int(value) if isinstance(value, numbers.Integral) else float(value)
    if math.isnan(number) or number < low or number > high or (low_open and number <= low):
        raise RingcastError("invalid_field", f"{name} {value} is out of range: {hint}", name)
    return number


def _text(name: str, value: object, limit: int) -> str:
    if not isinstance(value, str):
        raise RingcastError("invalid_field", f"{name} must be a string, not {type(value).__name__}", name)
    # Code points, as the server counts.
    if len(value) > limit:
        raise RingcastError("invalid_field", f"{name} is longer than {limit} characters", name)
    return value


def _flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise RingcastError("invalid_field", f"{name} must be True or False, not {type(value).__name__}", name)
    return value


def _seconds(name: str, value: object) -> Number:
    return _number(name, value, 0, MAX_SECONDS, "seconds, above 0", low_open=True)


def controls_list(value: object) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str) or not hasattr(value, "__iter__"):
        raise RingcastError("invalid_field", 'controls must be a list like ["cancel", "pause"]', "controls")
    chosen: list[str] = []
    for index, item in enumerate(value):  # type: ignore[arg-type]
        if item not in CONTROLS:
            raise RingcastError("invalid_field", f"controls[{index}] is not one of {', '.join(CONTROLS)}", "controls")
        if item not in chosen:
            chosen.append(item)
    return chosen


def update_fields(
    *,
    progress: Any = UNSET,
    completed: Any = UNSET,
    total: Any = UNSET,
    title: Any = UNSET,
    detail: Any = UNSET,
    state: Any = UNSET,
    parent: Any = UNSET,
    stale_after: Any = UNSET,
    visible: Any = UNSET,
    modal: Any = UNSET,
    hide_after: Any = UNSET,
    kind: Any = UNSET,
    abandon_after: Any = UNSET,
) -> dict[str, Any]:
    """The fields of an update, checked; what is UNSET is left out, None is sent as null."""
    fields: dict[str, Any] = {}
    if progress is not UNSET:
        fields["progress"] = None if progress is None else _number("progress", progress, 0, 1, "send 0.42 for 42%")
    if completed is not UNSET:
        fields["completed"] = None if completed is None else _number("completed", completed, 0, MAX_UNITS, "at most 2^53")
    if total is not UNSET:
        fields["total"] = None if total is None else _number("total", total, 0, MAX_UNITS, "above 0, at most 2^53", low_open=True)
    if title is not UNSET:
        if title is None:
            raise RingcastError("invalid_field", "title must be a string, not None (a title cannot be cleared)", "title")
        fields["title"] = _text("title", title, 200)
    if detail is not UNSET:
        fields["detail"] = None if detail is None else _text("detail", detail, 1000)
    if state is not UNSET:
        if state not in STATES:
            raise RingcastError("invalid_field", f"state '{state}' is not one of {', '.join(STATES)}", "state")
        fields["state"] = state
    if parent is not UNSET:
        if parent is not None and not is_valid_id(parent):
            raise RingcastError("invalid_field", f"parent '{str(parent)[:140]}' is not a valid task id", "parent")
        fields["parent"] = parent
    if stale_after is not UNSET:
        fields["staleAfter"] = None if stale_after is None else _seconds("staleAfter", stale_after)
    if visible is not UNSET:
        fields["visible"] = _flag("visible", visible)
    if modal is not UNSET:
        fields["modal"] = _flag("modal", modal)
    if hide_after is not UNSET:
        fields["hideAfter"] = None if hide_after is None else _seconds("hideAfter", hide_after)
    if kind is not UNSET:
        if kind is not None and not is_valid_id(kind):
            raise RingcastError(
                "invalid_field", f"kind '{str(kind)[:140]}' is not valid: like a task id, 1–128 letters, digits, '.', '_' or '-'", "kind")
        fields["kind"] = kind
    if abandon_after is not UNSET:
        fields["abandonAfter"] = None if abandon_after is None else _seconds("abandonAfter", abandon_after)
    return fields


def show_fields(*, hide_after: Any = UNSET, modal: Any = UNSET, detail: Any = UNSET) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if hide_after is not UNSET and hide_after is not None:
        fields["hideAfter"] = _seconds("hideAfter", hide_after)
    if modal is not UNSET and modal is not None:
        fields["modal"] = _flag("modal", modal)
    if detail is not UNSET and detail is not None:
        fields["detail"] = _text("detail", detail, 1000)
    return fields


def timer_fields(seconds: Any, *, interval: Any = UNSET, title: Any = UNSET, hide_after: Any = UNSET, start_at: Any = UNSET) -> dict[str, Any]:
    fields: dict[str, Any] = {"seconds": _seconds("seconds", seconds)}
    if interval is not UNSET and interval is not None:
        fields["interval"] = _number("interval", interval, 0.01, 86400, "seconds between ticks, at least 0.01")
    if title is not UNSET and title is not None:
        fields["title"] = _text("title", title, 200)
    if hide_after is not UNSET and hide_after is not None:
        fields["hideAfter"] = _seconds("hideAfter", hide_after)
    if start_at is not UNSET and start_at is not None:
        fields["startAt"] = _number("startAt", start_at, 0, 1e15, "Unix milliseconds")
    return fields


def log_lines(lines: object) -> list[str]:
    """A string (its lines) or an iterable of strings, as the server splits them: one element a
    line, a line break inside one starts another."""
    if isinstance(lines, str):
        items: list[object] = [lines[:-1] if lines.endswith("\n") else lines]
    elif hasattr(lines, "__iter__"):
        items = list(lines)  # type: ignore[call-overload]
    else:
        raise RingcastError("invalid_field", f"lines must be a string or a list of strings, not {type(lines).__name__}", "lines")
    result: list[str] = []
    for index, item in enumerate(items):
        if not isinstance(item, str):
            raise RingcastError("invalid_field", f"lines[{index}] must be a string, not {type(item).__name__}", "lines")
        result.extend(item.split("\n"))
    if not result:
        raise RingcastError("missing_field", "the log has no lines: send at least one", "lines")
    if len(result) > MAX_LOG_LINES:
        raise RingcastError(
            "body_too_large", f"a log request carries at most {MAX_LOG_LINES} lines; send {len(result)} in several", "lines")
    return result


def clip_detail(text: str) -> str:
    """`text` within the server's 1000 characters for a detail."""
    return text if len(text) <= 1000 else text[:999] + "…"
