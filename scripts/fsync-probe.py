#!/usr/bin/env python3
"""What a durable commit costs on this disk: the numbers behind the fsync argument of
docs/BENCHMARKS.md ("Store (issue 4)", re-checked in "Stores (issue 14)").

For each write size, appends that many bytes and fdatasyncs, N times, in a file in DIR
(default /var/tmp), like a WAL commit; prints the p50/p90 latency per synced write and the
synced bandwidth. Run on an idle machine and note the load average it prints.

    python3 scripts/fsync-probe.py [DIR] [--count N]
"""
import os
import statistics
import sys
import time

args = [a for a in sys.argv[1:] if not a.startswith("--")]
directory = args[0] if args else "/var/tmp"
count = int(sys.argv[sys.argv.index("--count") + 1]) if "--count" in sys.argv else 200
path = os.path.join(directory, f"fsync-probe-{os.getpid()}")
print(f"# {path}; load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
try:
    for size in [4096, 65536, 1 << 20, 4 << 20]:
        fd = os.open(path, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
        block = os.urandom(size)
        n = max(8, min(count, (256 << 20) // size))
        times = []
        start = time.perf_counter()
        for _ in range(n):
            t = time.perf_counter()
            os.write(fd, block)
            os.fdatasync(fd)
            times.append(time.perf_counter() - t)
        total = time.perf_counter() - start
        os.close(fd)
        times.sort()
        print(f"{size // 1024:>5} KiB x {n}: p50 {statistics.median(times) * 1000:.2f} ms, "
              f"p90 {times[int(n * 0.9)] * 1000:.2f} ms, {size * n / total / 1e6:.1f} MB/s synced")
finally:
    os.unlink(path)
