#!/usr/bin/env python3
"""A webhook receiver for the tests: a small HTTP server on a loopback port that checks each
delivery's X-Ringcast-Signature with Python's own hmac module and answers 503 to the first
--refuse deliveries (or to all of them with --refuse-all, until the line `accept` arrives on
stdin), then 200. With --cert and --key it speaks https (the deliveries' connections are TLS), and
with --client-ca it takes only senders that present a certificate that CA signed.

Its first line on stdout is {"listening": PORT}; then one JSON line per request:
{"n", "path", "delivery", "signature", "valid", "status", "body", "peer"} (body parsed as JSON;
peer: the sender's port, the same for requests on one kept connection)."""

import argparse
import hashlib
import hmac
import json
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--secret", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--refuse", type=int, default=0, help="answer 503 to this many deliveries first")
    parser.add_argument("--refuse-all", action="store_true", help="answer 503 until `accept` is read from stdin")
    parser.add_argument("--cert", help="a PEM certificate: speak https")
    parser.add_argument("--key", help="the certificate's PEM key")
    parser.add_argument("--client-ca", help="with --cert: ask each sender for a certificate this CA signed")
    args = parser.parse_args()
    secret = args.secret.encode()
    state = {"n": 0, "refuse_all": args.refuse_all}
    lock = threading.Lock()

    def emit(record):
        sys.stdout.write(json.dumps(record) + "\n")
        sys.stdout.flush()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            signature = self.headers.get("X-Ringcast-Signature", "")
            expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
            with lock:
                state["n"] += 1
                n = state["n"]
                refuse = state["refuse_all"] or n <= args.refuse
                status = 503 if refuse else 200
                try:
                    parsed = json.loads(body)
                except ValueError:
                    parsed = body.decode("utf-8", "replace")
                emit({"n": n, "path": self.path, "delivery": self.headers.get("X-Ringcast-Delivery"),
                      "signature": signature, "valid": hmac.compare_digest(signature, expected),
                      "status": status, "body": parsed, "peer": self.client_address[1]})
            answer = b'{"ok":false}' if refuse else b'{"ok":true}'
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    if args.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.cert, args.key)
        if args.client_ca:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(args.client_ca)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    emit({"listening": server.server_address[1]})
    threading.Thread(target=server.serve_forever, daemon=True).start()
    for line in sys.stdin:
        if line.strip() == "accept":
            with lock:
                state["refuse_all"] = False
        elif line.strip() == "refuse":
            with lock:
                state["refuse_all"] = True
    server.shutdown()


if __name__ == "__main__":
    main()
