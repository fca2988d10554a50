#!/usr/bin/env python3
"""An independent APNs client against `liverelay mock-apns` (or MockAPNsServer).

aioapns (PyPI) has its own HTTP/2 stack (the `h2` package) and signs its own
ES256 provider tokens with PyJWT/cryptography from the .p8 it is given, so this
checks the mock's HTTP/2, TLS and JWT verification against code we did not
write. The library is used unmodified; two things are set from outside it:

- aioapns always dials api.push.apple.com:443 (class attributes of its
  protocol). We subclass that protocol with the mock's host and port and
  point the pool at the subclass.
- aioapns offers no ALPN of its own and trusts the system store; we hand it an
  SSLContext that trusts the mock's CA file and offers "h2".

Usage:
  aioapns_peer.py --port P --ca cert.pem --key-file key.p8 --key-id K --team-id T
                  --bundle-id B --token HEX --unregistered-token HEX --wrong-key-file other.p8
  aioapns_peer.py ... --bench N [--connections C]   (prints pushes/s, checks all were 200)

Prints one line per check and ends with `N passed, N failed`; exit code 1 on any failure.
"""

import argparse
import asyncio
import ssl
import sys
import time

from aioapns import APNs, NotificationRequest, PushType
from aioapns.connection import APNsProductionClientProtocol


def make_client(args, key_file, max_connections=1):
    with open(key_file) as f:
        key = f.read()
    context = ssl.create_default_context(cafile=args.ca)
    context.set_alpn_protocols(["h2"])
    client = APNs(
        key=key,
        key_id=args.key_id,
        team_id=args.team_id,
        topic=args.bundle_id + ".push-type.liveactivity",
        ssl_context=context,
        max_connections=max_connections,
    )

    class MockProtocol(APNsProductionClientProtocol):
        APNS_SERVER = args.host
        APNS_PORT = args.port

    client.pool.protocol_class = MockProtocol
    return client


def update(timestamp, eta):
    return {"aps": {"timestamp": timestamp, "event": "update", "content-state": {"eta": eta}}}


def request(token, message, **extra):
    return NotificationRequest(device_token=token, message=message, push_type=PushType.LIVEACTIVITY,
                               priority=10, time_to_live=3600, **extra)


async def checks(args):
    results = []

    def check(name, ok, detail=""):
        results.append(ok)
        print(("ok   " if ok else "FAIL ") + name + ("" if ok else f": {detail}"), flush=True)

    now = int(time.time())
    client = make_client(args, args.key_file)

    r = await client.send_notification(request(args.token, update(now, 5)))
    check("a valid update is delivered (200)", r.is_successful and r.status == "200", f"{r.status} {r.description}")

    start = {"aps": {"timestamp": now + 1, "event": "start", "content-state": {"eta": 9},
                     "attributes-type": "RideAttributes", "attributes": {"driver": "Ann"},
                     "alert": {"title": "Ride", "body": "On the way"}}}
    r = await client.send_notification(request(args.token, start))
    check("a push-to-start is delivered (200)", r.status == "200", f"{r.status} {r.description}")

    r = await client.send_notification(request("zz" * 32, update(now, 1)))
    check("a non-hex token is 400 BadDeviceToken", r.status == "400" and r.description == "BadDeviceToken",
          f"{r.status} {r.description}")

    r = await client.send_notification(request(args.unregistered_token, update(now, 1)))
    check("an unregistered token is 410 Unregistered with a timestamp",
          r.status == "410" and r.description == "Unregistered" and isinstance(r.timestamp, int) and r.timestamp > 0,
          f"{r.status} {r.description} {r.timestamp}")

    r = await client.send_notification(request(args.token, update(now, 1), apns_topic="com.other.push-type.liveactivity"))
    check("another app's topic is 400 TopicDisallowed", r.status == "400" and r.description == "TopicDisallowed",
          f"{r.status} {r.description}")

    r = await client.send_notification(request(args.token, {"aps": {"event": "update"}}))
    check("a payload without timestamp is 400", r.status == "400" and r.description == "BadTimestamp",
          f"{r.status} {r.description}")

    many = await asyncio.gather(*[client.send_notification(request(args.token, update(now + 2 + i, i)))
                                  for i in range(200)])
    check("200 concurrent pushes on one connection are all delivered",
          all(x.status == "200" for x in many), str(sorted({x.status for x in many})))
    client.pool.close()

    wrong = make_client(args, args.wrong_key_file)
    r = await wrong.send_notification(request(args.token, update(now, 1)))
    check("a token signed with the wrong key is 403 InvalidProviderToken",
          r.status == "403" and r.description == "InvalidProviderToken", f"{r.status} {r.description}")
    wrong.pool.close()

    passed = sum(results)
    print(f"{passed} passed, {len(results) - passed} failed", flush=True)
    return 0 if passed == len(results) else 1


async def bench(args):
    client = make_client(args, args.key_file, max_connections=args.connections)
    now = int(time.time())
    # Warm up: the connections and the first JWT.
    await asyncio.gather(*[client.send_notification(request(args.token, update(now, 0))) for _ in range(args.connections)])
    in_flight = 500 * args.connections
    sent = 0
    statuses = {}
    started = time.perf_counter()
    while sent < args.bench:
        batch = min(in_flight, args.bench - sent)
        for r in await asyncio.gather(*[client.send_notification(request(args.token, update(now + sent + i, i)))
                                        for i in range(batch)]):
            statuses[r.status] = statuses.get(r.status, 0) + 1
        sent += batch
    elapsed = time.perf_counter() - started
    client.pool.close()
    ok = statuses.get("200", 0) == args.bench
    print(f"aioapns: {args.bench} pushes in {elapsed:.2f} s = {args.bench / elapsed:.0f} pushes/s "
          f"({args.connections} connection(s)); statuses {statuses}", flush=True)
    print(f"{1 if ok else 0} passed, {0 if ok else 1} failed", flush=True)
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--ca", required=True)
    p.add_argument("--key-file", required=True)
    p.add_argument("--key-id", required=True)
    p.add_argument("--team-id", required=True)
    p.add_argument("--bundle-id", required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--unregistered-token")
    p.add_argument("--wrong-key-file")
    p.add_argument("--bench", type=int, default=0)
    p.add_argument("--connections", type=int, default=1)
    args = p.parse_args()
    if args.bench:
        return asyncio.run(bench(args))
    if not (args.unregistered_token and args.wrong_key_file):
        p.error("the checks need --unregistered-token and --wrong-key-file")
    return asyncio.run(checks(args))


if __name__ == "__main__":
    sys.exit(main())
