#!/usr/bin/env python3
"""Checks that the module graph follows the path of one call (docs/ARCHITECTURE.md).

Every `import LiveRelay...` in Sources/<Module>/*.swift must name a module that
comes later on the path, a foundation, or the seam the module implements. A store
engine (SQLite, PostgreSQL) is imported by the composition root only, and
LiveRelayDomain imports no store at all. Run by scripts/test.sh; exits 1 naming
every import that breaks a rule.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

# The path of one call, in order: a module may import the ones after it.
PATH = [
    "LiveRelayServer",          # listener, connection state machine at work, auth
    "LiveRelayService",         # seam: the service protocol the server calls
    "LiveRelayWebhookDelivery", # each app's event feed to its webhook: reads the feed the service writes
    "LiveRelayActivities",      # the service: domain rules + store + push outlet
    "LiveRelayAdmin",           # the admin API: the tenant registry in the store
    "LiveRelayStorePostgres",   # engine: the store for several nodes
    "LiveRelayStoreSQLite",     # engine: the embedded durable store
    "LiveRelayStore",           # the store protocols and the memory engine
    "LiveRelayDomain",          # rules and values, the APNs payload builder: no store engine
    "LiveRelayPushOutlet",      # seam: what the service hands dispatch (the app's queue)
    "LiveRelayDispatch",        # per-app bounded queues, the dispatcher
    "LiveRelayAPNsClient",      # HTTP/2 to APNs over the OpenSSL handler
    "LiveRelayWebhooks",        # HTTPS POSTs to tenants' endpoints over the OpenSSL handler
]
# Values and codecs used all along the path; they import no path module.
FOUNDATIONS = ["LiveRelayWire", "LiveRelayMessages", "LiveRelayTLS", "LiveRelayAPNs", "LiveRelayBackoff", "LiveRelayCollections",
               "LiveRelayEndpoint", "LiveRelayHTTP2"]
# Seams are imported by the module that implements them, which sits below them.
IMPLEMENTS = {"LiveRelayActivities": {"LiveRelayService"}, "LiveRelayAdmin": {"LiveRelayService"}, "LiveRelayDispatch": {"LiveRelayPushOutlet"}}
# Callers and test infrastructure: they use the path, nothing on the path uses them.
CALLERS = {
    "LiveRelayClient": {"LiveRelayWire", "LiveRelayMessages", "LiveRelayTLS", "LiveRelayBackoff"},
    "LiveRelayBench": {"LiveRelayClient", "LiveRelayMessages", "LiveRelayWire"},
    "LiveRelayMockAPNs": {"LiveRelayAPNs", "LiveRelayMessages", "LiveRelayTLS"},
    # The operations port reads metrics through swift-metrics and readiness through its own
    # protocol, which the composition root feeds: it imports nothing of the path.
    "LiveRelayOps": set(),
}
# The composition: the one builder of the server (LiveRelayComposition) and the `liverelay`
# command over it. They may import anything; no other module imports them.
COMPOSITION = {"LiveRelayComposition", "LiveRelayCLI"}
# One module per store engine besides the memory one (in LiveRelayStore). Only the
# composition picks an engine: no module on the path imports one, an engine
# included (each builds on LiveRelayStore alone), and LiveRelayDomain imports no store.
ENGINES = {"LiveRelayStoreSQLite", "LiveRelayStorePostgres"}
STORE_MODULES = ENGINES | {"LiveRelayStore"}


def imports(module: str) -> set[str]:
    found = set()
    for source in (ROOT / "Sources" / module).glob("*.swift"):
        for line in source.read_text().splitlines():
            m = re.match(r"\s*(?:@testable\s+)?import\s+(LiveRelay\w+)", line)
            if m and m.group(1) != module:
                found.add(m.group(1))
    return found


def allowed(module: str) -> set[str]:
    if module in FOUNDATIONS:
        below = FOUNDATIONS[FOUNDATIONS.index(module) + 1:]
        # APNs imports the endpoint syntax it shares with the message layer, and nothing else.
        if module == "LiveRelayAPNs":
            return {"LiveRelayEndpoint"}
        return set(below) if module not in ("LiveRelayBackoff", "LiveRelayCollections", "LiveRelayEndpoint") else set()
    if module in CALLERS:
        return CALLERS[module]
    index = PATH.index(module)
    return set(PATH[index + 1:]) | set(FOUNDATIONS) | IMPLEMENTS.get(module, set())


def main() -> int:
    modules = sorted(p.name for p in (ROOT / "Sources").iterdir()
                     if p.is_dir() and p.name.startswith("LiveRelay"))
    problems = []
    for module in modules:
        if module in COMPOSITION:
            continue
        if module not in PATH and module not in FOUNDATIONS and module not in CALLERS:
            problems.append(f"{module}: not placed on the path (scripts/check-modules.py, docs/ARCHITECTURE.md)")
            continue
        found = imports(module)
        for name in sorted(found):
            if module == "LiveRelayDomain" and name in STORE_MODULES:
                problems.append(f"{module} imports {name}: the domain holds rules and values, and imports no store")
            elif name in ENGINES:
                problems.append(f"{module} imports the store engine {name}: only the composition ({', '.join(sorted(COMPOSITION))}) picks an engine")
            elif name not in allowed(module):
                problems.append(f"{module} imports {name}, which is not after it on the path")
    for problem in problems:
        print("check-modules: " + problem, file=sys.stderr)
    if not problems:
        print(f"check-modules: {len(modules)} modules follow the path of one call")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
