"""The event field rules of Tests/fixtures/event-cases.json, the file the server's Swift tests and
the Node client's tests read too: what the client's own checks say of each event, before anything is
sent, is what the server would answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ringcast import RingcastError
from ringcast._fields import check_id, log_lines, show_fields, timer_fields, update_fields

CASES = json.loads((Path(__file__).resolve().parents[3] / "Tests" / "fixtures" / "event-cases.json").read_text())["cases"]
# The wire's names as the client's keyword arguments.
ARGUMENTS = {"staleAfter": "stale_after", "hideAfter": "hide_after", "abandonAfter": "abandon_after", "startAt": "start_at"}
# What each event type's check accepts; anything else is refused at the call (a TypeError there,
# an unknown_field from the server).
ACCEPTED = {
    "update": {"progress", "completed", "total", "title", "detail", "state", "parent", "staleAfter", "visible", "modal", "hideAfter", "kind",
               "abandonAfter"},
    "show": {"hideAfter", "modal", "detail"},
    "timer": {"seconds", "interval", "title", "hideAfter", "startAt"},
    "log": {"lines"},
}


def expanded(value):
    """`{"repeat": "x", "times": 3}` stands for "xxx" (a list repeats as a list)."""
    if isinstance(value, dict):
        if set(value) == {"repeat", "times"}:
            return value["repeat"] * int(value["times"])
        return {key: expanded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [expanded(item) for item in value]
    return value


def check(event: dict) -> None:
    """The client's checks of one wire event: raises RingcastError as the server would refuse it."""
    kind = event["type"]
    check_id(event["id"])
    fields = {key: value for key, value in event.items() if key not in ("type", "id")}
    for name in fields:
        if name not in ACCEPTED[kind]:
            raise RingcastError("unknown_field", f"unknown field '{name}'", name)
    arguments = {ARGUMENTS.get(name, name): value for name, value in fields.items()}
    if kind == "update":
        update_fields(**arguments)
    elif kind == "show":
        show_fields(**arguments)
    elif kind == "timer":
        if "seconds" not in arguments:
            raise RingcastError("missing_field", "a timer needs seconds", "seconds")
        timer_fields(arguments.pop("seconds"), **arguments)
    elif kind == "log":
        if "lines" not in arguments:
            raise RingcastError("missing_field", "a log needs lines", "lines")
        if not isinstance(arguments["lines"], list):
            raise RingcastError("invalid_field", "lines must be a list on the wire", "lines")
        log_lines(arguments["lines"])


@pytest.mark.parametrize("case", CASES, ids=[json.dumps(case["event"])[:90] for case in CASES])
def test_the_client_answers_each_case_as_the_server_does(case):
    event = expanded(case["event"])
    if case.get("ok"):
        check(event)
        return
    with pytest.raises(RingcastError) as refused:
        check(event)
    assert (refused.value.error, refused.value.field) == (case["error"], case["field"])
