#!/usr/bin/env python3
"""Interop vectors between Google's protobuf (Python) and LiveRelay's protobuf-c bindings.

The Swift tests (Tests/LiveRelayMessagesTests/InteropTests.swift) run this script once per
direction, after generating the Python classes with `protoc --python_out=GEN -I Protos ...`:

  interop.py encode GEN VECTORS      prints JSON: every case encoded by Python
  interop.py decode GEN VECTORS      reads JSON [{"name", "hex"}] from stdin (Swift's bytes),
                                     prints JSON {name: [differences]} (empty list: equal)

VECTORS is the Vectors directory: cases.json (valid messages in protobuf JSON form, with
optional extra fields of unknown numbers) and invalid.json (requests Swift must reject),
admin.json with both kinds for the admin API (liverelay.admin.v1), channels.json with
both kinds for the broadcast channel RPCs and the channel fields of the activity requests,
and events.json with both kinds for the event feed (ListEvents).
The large cases are generated here (generated_cases) and, by the same rules, in Swift.
"""
import base64
import json
import sys


def fail(message):
    print(f"interop.py: {message}", file=sys.stderr)
    sys.exit(2)


try:
    from google.protobuf import descriptor_pool, json_format, message_factory
except ImportError as error:
    fail(f"the Python protobuf package is missing ({error}): pip install protobuf")


# ---- the generated large cases (InteropCases.swift builds the same values) ----

def token(i):
    """A 64-hex-digit lowercase token, distinct for every i."""
    return format(i, "016x") * 4


def large_text(n):
    """n repetitions of a mix of 1-, 2-, 3- and 4-byte UTF-8 characters."""
    return "aé漢🚀" * n


def generated_cases():
    tokens = [token(i) for i in range(1000)]
    users = [f"user-{i}-名前" for i in range(1000)]
    return [
        {"name": "start_1000_tokens", "type": "liverelay.v1.StartActivityRequest",
         "json": {"appId": "com.example.app", "activityId": "match-1000",
                  "attributesType": "MatchAttributes", "attributesJson": "{}",
                  "contentStateJson": "{}", "targets": {"pushToStartTokens": tokens}}},
        {"name": "start_1000_user_ids", "type": "liverelay.v1.StartActivityRequest",
         "json": {"appId": "com.example.app", "activityId": "match-users",
                  "attributesType": "MatchAttributes", "attributesJson": "{}",
                  "contentStateJson": "{}", "targets": {"externalUserIds": users}}},
        {"name": "ping_every_byte_value", "type": "liverelay.v1.PingRequest",
         "json": {"payload": base64.b64encode(bytes(range(256)) * 48).decode()}},
        {"name": "error_details_large", "type": "liverelay.v1.ErrorDetails",
         "json": {"reason": large_text(4000),
                  "fieldViolations": [{"field": f"targets.push_to_start_tokens[{i}]",
                                       "description": "not lowercase hex"} for i in range(1000)]}},
    ]


def every_byte_value(repeat):
    """bytes 0..255, `repeat` times."""
    return bytes(range(256)) * repeat


PEM_HEADER = b"-----BEGIN PRIVATE KEY-----\n"
PEM_FOOTER = b"\n-----END PRIVATE KEY-----\n"


def generated_admin_cases():
    """The admin API's bytes fields holding every byte value, and a large reply."""
    t = "liverelay.admin.v1."
    credentials = {"appId": "com.example.scores", "teamId": "ABCDE12345", "keyId": "KEY4567890"}
    return [
        {"name": "admin_put_credentials_pem_every_byte_value", "type": t + "PutAPNsCredentialsRequest",
         "json": dict(credentials, privateKeyPem=base64.b64encode(
             PEM_HEADER + every_byte_value(60) + PEM_FOOTER).decode())},
        {"name": "admin_put_credentials_trust_every_byte_value", "type": t + "PutAPNsCredentialsRequest",
         "json": dict(credentials, privateKeyFile="/run/secrets/AuthKey.p8", endpoint="mock-apns:2197",
                      trustCertificatePem=base64.b64encode(every_byte_value(255)).decode())},
        {"name": "admin_list_apps_reply_300_apps", "type": t + "ListAppsReply",
         "json": {"apps": [{"appId": f"app-{i}", "bundleId": f"com.example.app{i}", "enabled": i % 2 == 0,
                            "queueCapacity": i, "createdAtMs": str(-i)} for i in range(300)],
                  "nextPageToken": large_text(50)}},
    ]


def generated_channel_cases():
    """A page of the largest size: 1000 channels, every id of the longest length."""
    ids = [base64.b64encode(b"channel-%05d-" % i + bytes(82)).decode() for i in range(1000)]
    return [
        {"name": "list_channels_reply_1000_channels", "type": "liverelay.v1.ListChannelsReply",
         "json": {"channels": [{"appId": "com.example.app", "channelId": c,
                                "environment": "ENVIRONMENT_PRODUCTION" if i % 2 else "ENVIRONMENT_SANDBOX",
                                "storagePolicy": "CHANNEL_STORAGE_POLICY_NO_STORAGE",
                                "createdAt": str(1_893_456_000 + i)} for i, c in enumerate(ids)],
                  "nextPageToken": "c" * 256}},
    ]


def generated_event_cases():
    """A page of the largest size: 1000 settled calls, each with its account."""
    return [
        {"name": "list_events_reply_1000_events", "type": "liverelay.v1.ListEventsReply",
         "json": {"events": [{"cursor": str(1000 + 3 * i), "kind": "EVENT_KIND_CALL_SETTLED",
                              "timeMs": str(1_893_456_000_000 + i), "activityId": f"match-{i}",
                              "callTimestamp": str(1_893_456_000 + i), "idempotencyKey": f"key-{i}-名前",
                              "account": {"targeted": i, "delivered": i, "complete": True,
                                          "failures": [{"reason": "Unregistered", "count": i}] if i % 2 else []}}
                             for i in range(1000)],
                  "nextCursor": str(1000 + 3 * 999), "more": True}},
    ]


def generated_invalid():
    base = {"app_id": "com.example.scores", "activity_id": "m", "attributes_type": "MatchAttributes",
            "attributes_json": "{}", "content_state_json": "{}"}
    return [
        {"name": "start_1001_tokens", "type": "liverelay.v1.StartActivityRequest",
         "json": dict(base, targets={"push_to_start_tokens": [token(i) for i in range(1001)]}),
         "expect": {"field": "targets.push_to_start_tokens", "kind": "tooMany(count: 1001, max: 1000)"}},
        {"name": "update_content_state_4097_bytes", "type": "liverelay.v1.UpdateActivityRequest",
         "json": {"app_id": "com.example.scores", "activity_id": "m",
                  "content_state_json": '{"s":"' + "x" * 4089 + '"}'},
         "expect": {"field": "content_state_json", "kind": "tooLong(length: 4097, max: 4096)"}},
        {"name": "ping_over_the_size_limit", "type": "liverelay.v1.PingRequest",
         "json": {"payload": base64.b64encode(bytes(1 << 20)).decode()},
         "expect": {"field": "", "kind": f"tooLarge(size: {(1 << 20) + 4}, limit: {1 << 20})"}},  # tag, 3-byte length
    ]


# ---- building and encoding ----

def message_class(full_name):
    pool = descriptor_pool.Default()
    try:
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))
    except KeyError:
        fail(f"unknown message type {full_name}")


def build(case, unknown=False):
    """The case as a message of its type; with unknown=True, with the unknown fields of
    "appendIn" ({"path.to.sub.0": [raw fields]}) merged into its sub-messages."""
    message = message_class(case["type"])()
    json_format.ParseDict(case.get("json", {}), message)
    for path, fields in (case.get("appendIn", {}) if unknown else {}).items():
        target = message
        for part in path.split("."):
            target = target[int(part)] if part.isdigit() else getattr(target, part)
        target.MergeFromString(raw_fields(fields))
    return message


def varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def raw_fields(fields):
    """Wire bytes for [{"field": N, <kind>: value}], kinds: varint, fixed32, fixed64, string,
    bytes_hex, message (a nested list of such fields); or {"raw_hex": ...} verbatim."""
    out = bytearray()
    for f in fields:
        if "raw_hex" in f:  # verbatim bytes, for malformed input
            out += bytes.fromhex(f["raw_hex"])
            continue
        number = f["field"]
        if "varint" in f:
            out += varint(number << 3) + varint(f["varint"])
        elif "fixed64" in f:
            out += varint(number << 3 | 1) + (f["fixed64"] & (2**64 - 1)).to_bytes(8, "little")
        elif "fixed32" in f:
            out += varint(number << 3 | 5) + (f["fixed32"] & (2**32 - 1)).to_bytes(4, "little")
        else:
            if "string" in f:
                payload = f["string"].encode("utf-8")
            elif "bytes_hex" in f:
                payload = bytes.fromhex(f["bytes_hex"])
            else:
                payload = raw_fields(f["message"])
            out += varint(number << 3 | 2) + varint(len(payload)) + payload
    return bytes(out)


def encode(case):
    """Python's canonical bytes, then the case's raw fields appended (unknown numbers, or
    values Python itself refuses to encode, such as invalid UTF-8)."""
    encoded = build(case, unknown=True).SerializeToString(deterministic=True)
    return encoded + raw_fields(case.get("append", []))


def load(vectors):
    with open(f"{vectors}/cases.json", encoding="utf-8") as f:
        cases = json.load(f)["cases"] + generated_cases()
    with open(f"{vectors}/invalid.json", encoding="utf-8") as f:
        invalid = json.load(f)["cases"] + generated_invalid()
    with open(f"{vectors}/admin.json", encoding="utf-8") as f:
        admin = json.load(f)
    cases += admin["cases"] + generated_admin_cases()
    invalid += admin["invalid"]
    with open(f"{vectors}/channels.json", encoding="utf-8") as f:
        channels = json.load(f)
    cases += channels["cases"] + generated_channel_cases()
    invalid += channels["invalid"]
    with open(f"{vectors}/events.json", encoding="utf-8") as f:
        events = json.load(f)
    cases += events["cases"] + generated_event_cases()
    invalid += events["invalid"]
    names = [c["name"] for c in cases + invalid]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        fail(f"duplicate case names: {sorted(duplicates)}")
    return cases, invalid


def encode_all(cases, invalid):
    def entry(case):
        canonical = build(case).SerializeToString(deterministic=True)
        return {"name": case["name"], "type": case["type"],
                "hex": encode(case).hex(), "canonicalHex": canonical.hex()}
    return {"valid": [entry(c) for c in cases],
            "invalid": [dict(entry(c), expect=c["expect"]) for c in invalid]}


def differences(expected, got):
    """Readable differences between two messages of one type (empty when equal)."""
    if expected == got:
        return []
    e = json_format.MessageToDict(expected, preserving_proto_field_name=True)
    g = json_format.MessageToDict(got, preserving_proto_field_name=True)
    out = []
    for key in sorted(set(e) | set(g)):
        if e.get(key) != g.get(key):
            out.append(f"{key}: expected {str(e.get(key, '<absent>'))[:200]}, "
                       f"got {str(g.get(key, '<absent>'))[:200]}")
    return out or ["messages differ (unknown fields or presence): "
                   f"expected {expected.SerializeToString(deterministic=True).hex()[:200]}, "
                   f"got {got.SerializeToString(deterministic=True).hex()[:200]}"]


def decode_all(cases, swift_entries):
    by_name = {c["name"]: c for c in cases}
    report = {}
    for entry in swift_entries:
        case = by_name.get(entry["name"])
        if case is None:
            report[entry["name"]] = ["no such case in the vectors"]
            continue
        expected = build(case)
        try:
            got = type(expected).FromString(bytes.fromhex(entry["hex"]))
        except Exception as error:  # a DecodeError, reported as a difference
            report[entry["name"]] = [f"Python cannot parse Swift's bytes: {error}"]
            continue
        report[entry["name"]] = differences(expected, got)
    return report


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("encode", "decode"):
        fail("usage: interop.py encode|decode GENERATED_DIR VECTORS_DIR")
    mode, generated, vectors = sys.argv[1:]
    sys.path.insert(0, generated)
    try:
        import liverelay.v1.liverelay_pb2  # noqa: F401  registers both files in the default pool
        import liverelay.v1.activity_pb2  # noqa: F401
        import liverelay.admin.v1.admin_pb2  # noqa: F401  the admin API
    except ImportError as error:
        fail(f"cannot import the classes protoc generated in {generated}: {error}")
    cases, invalid = load(vectors)
    if mode == "encode":
        result = encode_all(cases, invalid)
    else:
        result = decode_all(cases, json.load(sys.stdin))
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
