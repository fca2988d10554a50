#!/usr/bin/env python3
"""An HTTPS webhook receiver for LiveRelay's tests, written apart from LiveRelay.

It checks what a tenant's server would check, with Python's own TLS, HTTP and
HMAC, so a test that passes against it shows LiveRelay's webhooks work with a
server that shares none of LiveRelay's code.

    python3 webhook_receiver.py --cert CERT --key KEY --secret SECRET --port 0 \
        --log FILE [--script SCRIPT] [--host 127.0.0.1]

Prints `LISTENING <port>` once it accepts connections. For each POST it
verifies `LiveRelay-Signature: t=<seconds>,v1=<hex>[,v1=<hex>...]`, the hex being
HMAC-SHA256(secret, b"<t>." + body), then answers as the script says
(`--secret @FILE` reads the secret from FILE at each request, so a test can
set it once the server has minted it). The
script is a JSON list of actions, re-read on every request and consumed from
the front (the rest is written back), so a test can change it while the
receiver runs:

    {"status": 500}                   answer 500
    {"delay_s": 15, "status": 200}    wait, then answer (for timeouts)
    {"close": true}                   close the connection without answering

With no script, or once it is used up, the answer is 200. Every request
appends one JSON line to --log, written before the answer is sent:
{"method", "path", "signature_ok", "status_sent", "headers", "body",
"body_base64"}; `body` is the parsed JSON or, failing that, the text, and
`status_sent` is null for a closed connection.

It exits when its standard input closes, so a test process that dies does not
leave it running.
"""

import argparse
import base64
import hmac
import hashlib
import http.server
import json
import os
import socket
import ssl
import sys
import threading
import time


def signature_ok(header, secret, body):
    """Whether `header` carries a v1 signature of `body` under `secret`."""
    if not header:
        return False
    timestamp = None
    signatures = []
    for field in header.split(","):
        key, _, value = field.strip().partition("=")
        if key == "t":
            timestamp = value
        elif key == "v1":
            signatures.append(value)
    if timestamp is None or not timestamp.isdigit() or not signatures:
        return False
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    # compare_digest is constant-time; every candidate is compared.
    return any([hmac.compare_digest(expected, candidate) for candidate in signatures])


class Receiver(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, context, options):
        super().__init__(address, Handler)
        self.context = context
        self.options = options
        self.lock = threading.Lock()

    def finish_request(self, request, client_address):
        # The handshake runs here, on the request's own thread, so a client that
        # stalls or fails in it holds up no other connection.
        try:
            tls = self.context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as error:
            print(f"handshake with {client_address[0]} failed: {error}", file=sys.stderr, flush=True)
            return
        try:
            super().finish_request(tls, client_address)
        finally:
            tls.close()

    def secret(self):
        """The secret signatures are checked against: --secret, or the file --secret @FILE names."""
        value = self.options.secret
        if not value.startswith("@"):
            return value
        with open(value[1:], encoding="utf-8") as f:
            return f.read().strip()

    def next_action(self):
        """The script's first action, removed from the file; {} when there is none."""
        path = self.options.script
        if not path:
            return {}
        with self.lock:
            try:
                with open(path) as file:
                    actions = json.load(file)
            except FileNotFoundError:
                return {}
            if not actions:
                return {}
            action, rest = actions[0], actions[1:]
            temporary = path + ".tmp"
            with open(temporary, "w") as file:
                json.dump(rest, file)
            os.replace(temporary, path)
            return action

    def log(self, record):
        with self.lock:
            with open(self.options.log, "a") as file:
                file.write(json.dumps(record) + "\n")
                file.flush()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        server = self.server
        ok = signature_ok(self.headers.get("LiveRelay-Signature"), server.secret(), body)
        action = server.next_action()
        status = None if action.get("close") else int(action.get("status", 200))
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = body.decode("utf-8", errors="replace")
        server.log({
            "method": self.command,
            "path": self.path,
            "signature_ok": ok,
            "status_sent": status,
            "headers": dict(self.headers.items()),
            "body": parsed,
            "body_base64": base64.b64encode(body).decode(),
        })
        if action.get("delay_s"):
            time.sleep(float(action["delay_s"]))
        if status is None:
            # No close_notify and no response: what a crashed server looks like.
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        answer = json.dumps({"received": True}).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)
        except OSError:
            pass  # the client gave up (a timeout test)

    def do_GET(self):
        self.send_error(405, "webhooks are POSTed")


def exit_when_stdin_closes():
    try:
        while sys.stdin.buffer.read(4096):
            pass
    finally:
        os._exit(0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--log", required=True)
    parser.add_argument("--script")
    options = parser.parse_args()

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(options.cert, options.key)
    server = Receiver((options.host, options.port), context, options)
    threading.Thread(target=exit_when_stdin_closes, daemon=True).start()
    print(f"LISTENING {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
