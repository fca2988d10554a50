#!/usr/bin/env python3
"""A TLS peer for LiveRelayTLS's socket tests: Python's ssl module, with the SSL context that the
`liverelay` client package (clients/python) builds from its TLSConfig (the CA to trust, the client
certificate), pinned to one TLS version. Runs in the Python that has the package (LiveRelayPython).

Modes:
  echo       TLS handshake, send --size bytes, read them back, compare, close with close_notify
             (or, with --abrupt, close the socket without one).
  plaintext  Send an HTTP request in clear text to the TLS port and report how the server closed.

Prints one JSON object on stdout. Exit 0 on success, 1 when the TLS exchange failed
(the JSON says why), 2 on a usage error.
"""
import argparse
import json
import select
import socket
import ssl
import sys

import liverelay


def pattern(size):
    block = bytes(range(256)) * 4096  # 1 MiB of every byte value
    out = bytearray()
    while len(out) < size:
        out += block
    return bytes(out[:size])


def echo(args):
    # Verifies the server's certificate against --cafile and its name (--hostname).
    context = liverelay.TLSConfig(ca_file=args.cafile, client_certificate_file=args.cert, client_key_file=args.key,
                                  server_name=args.hostname).build_context()
    version = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}[args.tls]
    context.minimum_version = version
    context.maximum_version = version
    if args.alpn:
        context.set_alpn_protocols(args.alpn.split(","))
    result = {"ok": False}
    try:
        with socket.create_connection(("127.0.0.1", args.port), timeout=args.timeout) as raw:
            with context.wrap_socket(raw, server_hostname=args.hostname) as tls:
                result["version"] = tls.version()
                result["cipher"] = tls.cipher()[0]
                result["alpn"] = tls.selected_alpn_protocol()
                payload = pattern(args.size)
                received = bytearray()
                # One thread only: an SSL object must not be read and written concurrently.
                # Send in chunks and, between chunks, read whatever has already come back.
                for offset in range(0, len(payload), 65536):
                    tls.sendall(payload[offset:offset + 65536])
                    while tls.pending() or select.select([tls], [], [], 0)[0]:
                        chunk = tls.recv(65536)
                        if not chunk:
                            break
                        received.extend(chunk)
                while len(received) < len(payload):
                    chunk = tls.recv(65536)
                    if not chunk:
                        break
                    received.extend(chunk)
                result["received"] = len(received)
                result["intact"] = bytes(received) == payload
                if args.abrupt:
                    # Close the TCP connection with no close_notify (Python's close() sends none).
                    result["ok"] = result["intact"]
                else:
                    # Clean shutdown: send close_notify and wait for the server's.
                    tls.unwrap()
                    result["closeNotifyAnswered"] = True
                    result["ok"] = result["intact"]
    except (ssl.SSLError, OSError) as error:
        result["error"] = f"{type(error).__name__}: {error}"
    print(json.dumps(result))
    return 0 if result["ok"] else 1


def plaintext(args):
    result = {"ok": False}
    try:
        with socket.create_connection(("127.0.0.1", args.port), timeout=args.timeout) as raw:
            raw.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            received = bytearray()
            while True:
                chunk = raw.recv(65536)
                if not chunk:
                    result["closedWith"] = "FIN"
                    break
                received.extend(chunk)
            result["received"] = len(received)
            # A TLS alert record starts with content type 21.
            result["alert"] = len(received) > 0 and received[0] == 21
            result["ok"] = True
    except ConnectionResetError as error:
        result["closedWith"] = "RST"
        result["error"] = str(error)
    except OSError as error:
        result["error"] = f"{type(error).__name__}: {error}"
    print(json.dumps(result))
    return 0 if result["ok"] else 1


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["echo", "plaintext"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tls", choices=["1.2", "1.3"], default="1.3")
    parser.add_argument("--cafile")
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--alpn")
    parser.add_argument("--hostname", default="localhost")
    parser.add_argument("--size", type=int, default=1024 * 1024)
    parser.add_argument("--timeout", type=float, default=20.0)
    parser.add_argument("--abrupt", action="store_true", help="close without close_notify")
    args = parser.parse_args()
    if args.mode == "echo":
        if not args.cafile:
            parser.error("echo needs --cafile")
        return echo(args)
    return plaintext(args)


if __name__ == "__main__":
    sys.exit(main())
