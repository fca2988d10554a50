#!/usr/bin/env python3
"""Splits a perf profile of the server by whose code each sample is spent in.

Reads `perf script -F comm,tid,ip,sym,dso` output (recorded with -g). Each sample
goes to the first frame, from the leaf up, that belongs to a known owner:
http2 (libnghttp2, the APNs client's HTTP/2; NIOHTTP2 and NIOHPACK, the mock's),
tls (libssl, libcrypto, LiveRelayTLS),
liverelay (any other LiveRelay module), nio (NIOCore, NIOPosix), other packages
(metrics, logging), told apart by the module a Swift symbol is defined in. Frames of
the Swift runtime, libc and the standard library's generic code belong to nobody, so
a retain, a malloc or a Dictionary lookup counts for the code that called it. A
sample in the kernel counts as "kernel" (system calls, page faults); one with no owner
at all as "other" (mostly malloc and free, whose callers perf cannot unwind). Samples
whose stack passes through the RPC server (LiveRelayServer) are counted apart:
in `scripts/bench.sh profile` they are the benchmark registering its tokens,
not dispatch.

Why: it shows how much of a push's CPU is the HTTP/2 library's and TLS's, which
no change to our code can remove, next to ours.

    perf script -i perf.data -F comm,tid,ip,sym,dso | scripts/bench/profile-owners.py [--top OWNER]
"""

import collections
import re
import sys

RPC = "rpc (not dispatch)"


def module_of(symbol):
    """The module a mangled Swift symbol is defined in (`$s7NIOCore...` -> NIOCore)."""
    match = re.match(r"\$s(\d+)", symbol)
    if not match:
        return None
    start = match.end()
    return symbol[start : start + int(match.group(1))]


def owner(symbol, dso):
    if "kernel" in dso:
        return "kernel"
    if "libssl" in dso or "libcrypto" in dso:
        return "tls"
    if "libnghttp2" in dso:
        return "http2"
    module = module_of(symbol)
    if module is None:
        return None  # C, the runtime, or the standard library's generic code (`$ss...`)
    if module == "LiveRelayTLS":
        return "tls"
    if module.startswith("LiveRelay"):
        return "liverelay"
    if module in ("NIOHTTP2", "NIOHPACK"):
        return "http2"
    if module.startswith("NIO"):
        # NIOCore's types specialized or extended by nio-http2 (its stream buffers) are nio-http2's.
        return "http2" if "NIOHTTP2" in symbol or "NIOHPACK" in symbol else "nio"
    return "other packages"


def classify(frames):
    """The owner of one sample and the frame that decided it."""
    if any(module_of(symbol) == "LiveRelayServer" for symbol, _ in frames):
        return RPC, None
    for index, (symbol, dso) in enumerate(frames):
        found = owner(symbol, dso)
        if found == "kernel":
            if index == 0:
                return "kernel", symbol
            continue  # a kernel frame above user code (a signal): keep walking
        if found:
            return found, symbol
    return "other", frames[0][0]


def samples(lines):
    frames = []
    for line in lines:
        if not line.strip() or not line[0].isspace():
            if frames:
                yield frames
            frames = []
            continue
        match = re.match(r"\s*[0-9a-f]+\s+(.*)\s+\((.*)\)\s*$", line)
        if match:
            frames.append((match.group(1), match.group(2)))
    if frames:
        yield frames


def main():
    top = sys.argv[2] if len(sys.argv) > 2 and sys.argv[1] == "--top" else None
    counts = collections.Counter()
    symbols = collections.Counter()
    for frames in samples(sys.stdin):
        who, symbol = classify(frames)
        counts[who] += 1
        if who == top:
            symbols[symbol] += 1
    total = sum(counts.values())
    measured = total - counts[RPC]
    if measured == 0:
        print("no samples outside the RPC server")
        return
    print(f"{'owner':20s} {'samples':>8s} {'share':>7s}")
    for who, count in counts.most_common():
        if who != RPC:
            print(f"{who:20s} {count:8d} {100 * count / measured:6.1f}%")
    print(f"{'(' + RPC + ')':20s} {counts[RPC]:8d}  left out")
    for symbol, count in symbols.most_common(25):
        print(f"{count:6d} {symbol[:150]}")


if __name__ == "__main__":
    main()
