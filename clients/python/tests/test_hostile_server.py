"""The client against a server that breaks the protocol or sends without end: what it holds, how
long a call takes and how often it reconnects stay bounded, and the user is told.

Each client runs in an interpreter of its own (its peak RSS and CPU time are then its own); the
bounds asserted are generous against what they guard (the client's limit is 16 MiB a message and
4 096 fragments; unbounded, the same cases took gigabytes, tens of seconds, seven reconnects a
second)."""

from __future__ import annotations

import socket
import time

import pytest
from hostile import HostileServer, frame, run_client

from ringcast._publisher import MAX_DEPTH, decode_message
from ringcast._websocket import MAX_FRAGMENTS, MAX_MESSAGE, ConnectionClosed, ProtocolViolation, WebSocket

# A client that publishes into a hostile server for `seconds`, then reports what it cost.
PUBLISHER = """
    import ringcast
    rss, cpu = peak_mib(), cpu_seconds()
    rc = ringcast.Ringcast(URL, timeout=2)
    rc.update("py.hostile", progress=0.5)
    time.sleep({seconds})
    print(json.dumps({{"rss_growth": peak_mib() - rss, "cpu": cpu_seconds() - cpu,
                      "errors": [[e.error, e.message] for e in rc.errors]}}))
    rc.publisher.close(0.5)
"""


def test_endless_fragments_are_cut_at_the_message_limit_with_1009():
    def endless(server, sock, record):
        sock.sendall(frame(b"[" + b" " * 65535, final=False))
        server.send_while_taken(sock, record, frame(b" " * 65536, opcode=0x0, final=False))

    with HostileServer(websocket=endless) as server:
        result = run(PUBLISHER.format(seconds=3), server)
        first = server.websockets()[0]
    # The client took the message limit and what the kernel buffers hold, not more.
    assert first.sent < MAX_MESSAGE + 16 * 1024 * 1024, first.sent
    assert first.close_code == 1009
    assert result["rss_growth"] < 150, result
    assert result["errors"] and result["errors"][0][0] == "protocol_violation"
    assert "16 MiB" in result["errors"][0][1]


def test_a_message_in_40_000_one_byte_fragments_costs_little_cpu():
    message = b'{"type":"error","error":"x","message":"' + b"y" * 39960 + b'"}'
    frames = [frame(message[:1], final=False)]
    frames += [frame(message[i:i + 1], opcode=0x0, final=False) for i in range(1, len(message) - 1)]
    frames.append(frame(message[-1:], opcode=0x0))
    assert len(frames) == len(message) >= 40000

    def fragmented(server, sock, record):
        sock.sendall(b"".join(frames))
        record.sent = len(message)

    with HostileServer(websocket=fragmented) as server:
        result = run(PUBLISHER.format(seconds=3), server)
        connections = server.websockets()
    assert connections[0].close_code == 1009
    # Three seconds of a client that is sent the message on every connection.
    assert result["cpu"] < 1.5, result
    assert any(f"{MAX_FRAGMENTS} fragments" in message for _, message in result["errors"]), result


def test_a_message_nested_200_000_deep_is_refused_and_reconnects_back_off():
    deep = b"[" * 200000 + b"]" * 200000

    def nested(server, sock, record):
        sock.sendall(frame(deep))

    with HostileServer(websocket=nested) as server:
        started = time.monotonic()
        result = run(PUBLISHER.format(seconds=4), server)
        window = time.monotonic() - started
        connections = server.websockets()
    assert connections[0].close_code == 1009
    assert any(f"deeper than {MAX_DEPTH}" in message for _, message in result["errors"]), result
    # The back-off grows after each connection that broke the protocol (at least 1/8, 1/4,
    # 1/2, 1, 2 s): a handful in the window, where a loop that starts over took seven a second.
    assert len(connections) <= 8, f"{len(connections)} connections in {window:.1f} s"


@pytest.mark.parametrize("answer", ["endless", "drip-body", "drip-head"])
def test_get_is_bounded_in_time_and_size(answer):
    def http(server, sock, record):
        if answer == "drip-head":
            piece, head = b"X", b"HTTP/1.1 200 OK\r\n"
        else:
            piece = b"[" * 65536 if answer == "endless" else b" "
            # No length: the body ends when the connection does, which it never does.
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
        sock.sendall(head)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not server.stopping.is_set():
            sock.sendall(piece)
            record.sent += len(piece)
            if answer != "endless":
                time.sleep(0.05)

    with HostileServer(http=http) as server:
        result = run("""
            import ringcast
            rc = ringcast.Ringcast(URL, timeout=2)
            rss = peak_mib()
            started = time.monotonic()
            try:
                rc.get("py.hostile")
                outcome = ["answered", ""]
            except ringcast.RingcastError as error:
                outcome = [error.error, error.message]
            print(json.dumps({"seconds": time.monotonic() - started, "rss_growth": peak_mib() - rss, "outcome": outcome}))
            rc.publisher.close(0.5)
        """, server)
    assert result["seconds"] < 3, result
    assert result["rss_growth"] < 150, result
    expected = "answer_too_large" if answer == "endless" else "timeout"
    assert result["outcome"][0] == expected, result
    assert ("16 MiB" if answer == "endless" else "within 2 s") in result["outcome"][1]


def test_a_message_of_the_most_fragments_is_put_together_and_one_more_is_refused():
    message = b'{"type":"hello"}' + b" " * (MAX_FRAGMENTS - 16)
    pieces = [frame(message[:1], final=False)]
    pieces += [frame(message[i:i + 1], opcode=0x0, final=False) for i in range(1, MAX_FRAGMENTS - 1)]
    whole = b"".join(pieces + [frame(message[-1:], opcode=0x0)])
    too_many = b"".join(pieces + [frame(b" ", opcode=0x0, final=False), frame(b" ", opcode=0x0)])
    for data, fits in ((whole, True), (too_many, False)):
        server_end, client_end = socket.socketpair()
        try:
            ws = WebSocket(client_end, data)
            if fits:
                assert ws.receive(readable=False) == [message.decode()]
            else:
                with pytest.raises(ProtocolViolation) as refused:
                    ws.receive(readable=False)
                assert refused.value.code == 1009
        finally:
            server_end.close()
            client_end.close()


@pytest.mark.parametrize(("data", "code"), [
    (frame(b"x", opcode=0x0), 1002),                       # a continuation of nothing
    (frame(b"[", final=False) + frame(b"]"), 1002),        # a message begun inside another
    (bytes([0x81, 0x81, 1, 2, 3, 4, 5]), 1002),            # masked, as only a client may
    (frame(b"x" * 126, opcode=0x9), 1002),                 # a ping longer than a control frame may be
    (frame(b"\xff\xfe"), 1007),                            # text that is not UTF-8
    (bytes([0x81, 127]) + (MAX_MESSAGE + 1).to_bytes(8, "big"), 1009),
])
def test_frames_a_server_must_not_send_close_the_connection_with_the_right_code(data, code):
    server_end, client_end = socket.socketpair()
    try:
        ws = WebSocket(client_end, data)
        with pytest.raises(ConnectionClosed) as refused:
            ws.receive(readable=False)
        assert isinstance(refused.value, ProtocolViolation) and refused.value.code == code
    finally:
        server_end.close()
        client_end.close()


def test_nesting_is_judged_without_counting_brackets_inside_strings():
    assert decode_message('{"a":"' + "[" * 1000 + '"}') == {"a": "[" * 1000}
    assert decode_message("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    with pytest.raises(ProtocolViolation):
        decode_message("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))


def run(source, server):
    return run_client(source, server.url)
