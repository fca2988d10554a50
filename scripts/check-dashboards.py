#!/usr/bin/env python3
"""Checks the Prometheus rules and Grafana dashboards of Deploy/ against the server.

1. `promtool check rules` and `promtool test rules` on Deploy/prometheus/
   (alerts_test.yaml holds the unit tests of alerts.yaml).
2. Every PromQL expression of every Grafana dashboard in Deploy/grafana/ parses
   (promtool checks them as recording rules, with the dashboard's variables
   replaced by values).
3. Every metric an alert expression or a dashboard query names, and every label
   it selects or groups by, is one that a live `liverelay serve` exports: this
   starts .build/debug/liverelay (or $LIVERELAY_BIN) on loopback with a SQLite
   store in a temporary directory, pushing to a `liverelay mock-apns` of its
   own, makes the traffic that creates the series only traffic creates (calls,
   deliveries, a quota refusal, an app held for rejected credentials, one app's
   webhook delivering to the tests' HTTPS receiver on loopback and another's
   failing), scrapes /metrics and compares. `up` (made by Prometheus) is the only name allowed
   without being exported.

    scripts/check-dashboards.py              everything (needs the debug build)
    scripts/check-dashboards.py --no-server  1 and 2, and the names' syntax only

Needs promtool (Debian's prometheus package), openssl, and PyYAML (installed
with yamllint). Prints one line per problem; exits 1 if there is any.
"""
import ctypes
import hashlib
import json
import os
import pathlib
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml  # PyYAML: installed with yamllint (scripts/setup.sh)

ROOT = pathlib.Path(__file__).resolve().parent.parent
RULE_TESTS = ROOT / "Deploy/prometheus/alerts_test.yaml"
DASHBOARDS = sorted((ROOT / "Deploy/grafana").glob("*.json"))
# Labels Prometheus adds to every scraped series (the target's).
TARGET_LABELS = {"instance", "job"}
# Names made by Prometheus, not by the server.
PROMETHEUS_NAMES = {"up"}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right",
            "inf", "nan", "atan2"}
# What the dashboards' Grafana variables stand for when their queries are checked by promtool.
GRAFANA_VALUES = {"__rate_interval": "5m", "__interval": "1m", "__range": "1h", "instance": ".*", "app": ".*"}
SERVER_SECONDS = 120  # the longest the live part may take
problems = []


def problem(message):
    problems.append(message)
    print(message)


# --- PromQL ------------------------------------------------------------------------------------------------------

def grafana_free(expr):
    """`expr` with Grafana's variables ($app, ${app}, ${app:regex}, [[app]]) replaced by what GRAFANA_VALUES says."""
    def value(match):
        return GRAFANA_VALUES.get(match[1] or match[2] or match[3], "1m")
    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]", value, expr)


def parse(expr):
    """The metric names, the label names of the selectors per metric, and the grouping labels of `expr`."""
    text = grafana_free(expr)
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', text)  # string literals
    text = re.sub(r"#[^\n]*", "", text)  # comments
    text = re.sub(r"\[[^\]]*\]", "", text)  # range and subquery durations
    text = re.sub(r"\boffset\s+-?[0-9a-z]+", "", text)
    selected = []  # (metric or None, [label, ...])
    def selector(match):
        labels = re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)", match[2])
        selected.append((match[1], labels))
        return match[1] or ""
    text = re.sub(r"([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*\{([^}]*)\}", selector, text)
    grouping = []
    def group(match):
        grouping.extend(label.strip() for label in match[1].split(",") if label.strip())
        return " "
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", group, text)
    text = re.sub(r"\bgroup_(?:left|right)\b", " ", text)
    text = re.sub(r"(?<![a-zA-Z0-9_:.])[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?", " ", text)  # numbers
    names = set()
    for match in re.finditer(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?", text):
        if match[2] or match[1].lower() in KEYWORDS:
            continue  # a function or aggregation, or a keyword
        names.add(match[1])
    names |= {metric for metric, _ in selected if metric}
    return names, selected, grouping


def rule_expressions():
    """(where, expr) of every rule in Deploy/prometheus/ (the tests excepted)."""
    found = []
    for path in sorted((ROOT / "Deploy/prometheus").glob("*.yaml")):
        if path.name.endswith("_test.yaml"):
            continue
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                name = rule.get("alert") or rule.get("record")
                found.append((f"{path.relative_to(ROOT)}: {name}", rule["expr"]))
    return found


def test_series():
    """(where, series) of every input series of the rule tests: a test of a metric the server lacks proves nothing."""
    found = []
    for test in yaml.safe_load(RULE_TESTS.read_text()).get("tests", []):
        for series in test.get("input_series", []):
            found.append((f"{RULE_TESTS.relative_to(ROOT)}: input series", series["series"]))
    return found


def panels(items):
    for panel in items:
        yield panel
        yield from panels(panel.get("panels", []))  # rows hold their panels when collapsed


def dashboard_expressions():
    """(where, expr) of every query of every dashboard, and (where, metric, label) of its label_values variables."""
    exprs, label_values = [], []
    for path in DASHBOARDS:
        dashboard = json.loads(path.read_text())
        where = path.relative_to(ROOT)
        for panel in panels(dashboard.get("panels", [])):
            for target in panel.get("targets", []):
                if "expr" in target:
                    exprs.append((f"{where}: panel \"{panel.get('title')}\" {target.get('refId', '')}", target["expr"]))
        for variable in dashboard.get("templating", {}).get("list", []):
            if variable.get("type") != "query":
                continue
            query = variable.get("query")
            query = query.get("query", "") if isinstance(query, dict) else query or ""
            found = re.fullmatch(r"\s*label_values\((?:(.+),\s*)?([a-zA-Z_][a-zA-Z0-9_]*)\)\s*", query)
            if found is None:
                problem(f"{where}: variable {variable.get('name')}: not a label_values(metric, label) query: {query}")
                continue
            if found[1] is None:
                problem(f"{where}: variable {variable.get('name')}: label_values names no metric")
                continue
            exprs.append((f"{where}: variable {variable.get('name')}", found[1]))
            label_values.append((f"{where}: variable {variable.get('name')}", found[1], found[2]))
    return exprs, label_values


# --- promtool ----------------------------------------------------------------------------------------------------

def promtool(*args):
    result = subprocess.run(["promtool", *args], capture_output=True, text=True, cwd=ROOT)
    if result.returncode != 0:
        problem(f"promtool {' '.join(args)} failed:\n{result.stdout}{result.stderr}".rstrip())
    return result.returncode == 0


def check_with_promtool(dashboard_exprs):
    if shutil.which("promtool") is None:
        problem("promtool is missing: apt-get install prometheus (scripts/setup.sh installs it)")
        return
    rule_files = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "Deploy/prometheus").glob("*.yaml"))
                  if not p.name.endswith("_test.yaml")]
    promtool("check", "rules", *rule_files)
    promtool("test", "rules", str(RULE_TESTS.relative_to(ROOT)))
    # The dashboards' queries (and their variables' metric selectors), as recording rules: promtool parses each.
    with tempfile.TemporaryDirectory() as work:
        rules = [{"record": f"dashboard:query_{i}", "expr": grafana_free(expr)} for i, (_, expr) in enumerate(dashboard_exprs)]
        path = pathlib.Path(work, "dashboards.yaml")
        path.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
        result = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True)
        if result.returncode != 0:
            failing = sorted({int(n) for n in re.findall(r"dashboard:query_(\d+)", result.stdout + result.stderr)})
            wheres = "".join(f"\n  query_{i}: {dashboard_exprs[i][0]}: {dashboard_exprs[i][1]}" for i in failing)
            problem(f"a dashboard query does not parse:\n{result.stdout}{result.stderr}".rstrip() + wheres)


# --- the live server ---------------------------------------------------------------------------------------------

def die_with_parent():
    """In the child: SIGKILL when this script dies, however it dies, so no server outlives the check."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Child:
    def __init__(self, name, args, work):
        self.name = name
        self.log = pathlib.Path(work, f"{name}.log")
        with self.log.open("w") as out:
            self.process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            preexec_fn=die_with_parent)

    def port(self, prefix, deadline):
        """The port of the first output line starting with `prefix` ("listening on", "ops listening on")."""
        while time.monotonic() < deadline:
            for line in self.log.read_text(errors="replace").splitlines():
                found = re.match(rf"{prefix} \S*:(\d+)\b", line)
                if found:
                    return int(found[1])
            if self.process.poll() is not None:
                break
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} did not print '{prefix} HOST:PORT':\n{self.transcript()}")

    def transcript(self):
        return self.log.read_text(errors="replace")[-4000:]

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()  # a throwaway in a temporary directory: no drain needed
        self.process.wait()


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def write_setup(work):
    """Certificates, APNs keys, the API key file and the configs of the mock and the server; returns the API key."""
    w = pathlib.Path(work)
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
            "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-keyout", str(w / "key.pem"), "-out", str(w / "cert.pem"))
    for name in ("apns-good", "apns-held", "apns-other"):
        openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-out", str(w / f"{name}.p8"))
    key_id = "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz234567") for _ in range(12))
    secret = secrets.token_hex(32)
    (w / "api-keys.json").write_text(json.dumps({"keys": [{
        "key_id": key_id, "secret_sha256": hashlib.sha256(secret.encode()).hexdigest(), "all_apps": True,
        "allowed_methods": ["RegisterToken", "StartActivity", "UpdateActivity", "EndActivity", "Ping"],
        "created_at": "2026-01-01T00:00:00Z", "label": "check-dashboards"}]}))
    # The mock knows app "held" by another key than the one the server signs with: APNs answers 403
    # InvalidProviderToken, and the server holds the app.
    (w / "mock.json").write_text(json.dumps({
        "host": "127.0.0.1", "port": 0, "cert_out": str(w / "mock-cert.pem"), "record": str(w / "mock.jsonl"),
        "apps": [{"bundle_id": "com.example.good", "team_id": "LRCHECK001", "key_id": "LRGOODKEY1",
                  "key_file": str(w / "apns-good.p8")},
                 {"bundle_id": "com.example.held", "team_id": "LRCHECK001", "key_id": "LRHELDKEY1",
                  "key_file": str(w / "apns-other.p8")}],
        "unregistered": {UNREGISTERED: 1767225600000}}))
    return f"lrk_{key_id}_{secret}"


def serve_config(work, mock_port):
    w = pathlib.Path(work)
    def app(name, **extra):
        return {"id": name, "bundle_id": f"com.example.{name}", **extra,
                "apns": {"team_id": "LRCHECK001", "key_id": f"LR{name.upper()}KEY1", "key_file": str(w / f"apns-{name}.p8"),
                         "endpoint": f"127.0.0.1:{mock_port}", "trust_certificate": str(w / "mock-cert.pem")}}
    (w / "serve.json").write_text(json.dumps({
        "listen": {"host": "127.0.0.1", "port": 0}, "ops": {"host": "127.0.0.1", "port": 0},
        "tls": {"certificate": str(w / "cert.pem"), "private_key": str(w / "key.pem")},
        "api_key_file": str(w / "api-keys.json"), "data_dir": str(w / "data"), "store": {"kind": "sqlite"},
        "limits": {"drain_time_ms": 1000},
        # Webhooks to this script's receiver on loopback (trusting its certificate), and a failing one marked
        # failing after a second of retries.
        "webhooks": {"retry_s": 1, "probe_s": 1, "backoff_max_s": 1, "timeout_s": 5, "ca_file": str(w / "cert.pem"),
                     "allow_private_addresses": True},
        "apps": [app("good"), app("held", queue_capacity=1, quotas={"max_tokens": 1})]}))


class WebhookReceiver:
    """The tests' HTTPS webhook receiver (Tests/Support/webhook_receiver.py) on loopback, with the
    server's own certificate: it answers every POST 200 and exits when its standard input closes."""

    def __init__(self, work, deadline):
        self.process = subprocess.Popen(
            [sys.executable, str(ROOT / "Tests/Support/webhook_receiver.py"), "--cert", str(pathlib.Path(work, "cert.pem")),
             "--key", str(pathlib.Path(work, "key.pem")), "--secret", "unchecked", "--port", "0",
             "--log", str(pathlib.Path(work, "webhooks.jsonl"))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        if not line.startswith("LISTENING ") or time.monotonic() > deadline:
            self.stop()
            raise RuntimeError(f"the webhook receiver did not start: {line!r}")
        self.port = int(line.split()[1])

    def stop(self):
        self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def bootstrap_admin(binary, work):
    """An admin key minted into the server's registry before it starts (`liverelay admin bootstrap`)."""
    pathlib.Path(work, "data").mkdir(mode=0o700)
    result = subprocess.run([binary, "admin", "bootstrap", "--config", str(pathlib.Path(work, "serve.json"))],
                            capture_output=True, text=True, timeout=30)
    found = re.search(r"^export LIVERELAY_ADMIN_KEY=(\S+)$", result.stdout, re.MULTILINE)
    if result.returncode != 0 or found is None:
        raise RuntimeError(f"liverelay admin bootstrap: exit {result.returncode}\n{result.stdout}{result.stderr}")
    return found[1]


def webhooks(binary, work, rpc_port, admin_key, receiver_port):
    """App good's webhook to the receiver (delivered), app held's to a port that refuses (failed, then failing)."""
    environment = {**os.environ, "LIVERELAY_ADMIN_KEY": admin_key}
    for app, url in (("good", f"https://127.0.0.1:{receiver_port}/liverelay"), ("held", "https://127.0.0.1:1/liverelay")):
        result = subprocess.run([binary, "admin", "webhook", "put", "--port", str(rpc_port),
                                 "--ca-file", str(pathlib.Path(work, "cert.pem")), "--timeout", "10",
                                 "--app", app, "--url", url], capture_output=True, text=True, timeout=30, env=environment)
        if result.returncode != 0:
            raise RuntimeError(f"liverelay admin webhook put --app {app}: exit {result.returncode}\n{result.stderr}")


TOKENS = [f"{i:02x}" * 32 for i in (0x11, 0x22, 0x33)]
UNREGISTERED = "44" * 32


def traffic(binary, work, rpc_port, api_key):
    """The calls that create the series only traffic creates; a call's refusal is expected where noted."""
    base = [binary, "--port", str(rpc_port), "--ca-file", str(pathlib.Path(work, "cert.pem")), "--api-key", api_key,
            "--timeout", "10"]
    def call(command, *args, refused=False):
        result = subprocess.run([base[0], command, *base[1:], *args], capture_output=True, text=True, timeout=30)
        if (result.returncode != 0) != refused:
            raise RuntimeError(f"liverelay {command} {' '.join(args)}: exit {result.returncode}\n{result.stderr}")
    def register(app, token):
        return ("--app", app, "--kind", "push-to-start", "--environment", "sandbox",
                "--attributes-type", "CheckAttributes", "--token", token)
    def start(app, activity, token, *extra):
        return ("--app", app, "--activity", activity, "--attributes-type", "CheckAttributes", "--attributes", "{}",
                "--content-state", '{"step":1}', "--token", token, *extra)
    call("ping")
    for token in (TOKENS[0], UNREGISTERED):
        call("register-token", *register("good", token))
    call("start", *start("good", "check-1", TOKENS[0], "--wait-for-delivery"))  # delivered
    call("start", *start("good", "check-2", UNREGISTERED, "--wait-for-delivery"))  # pruned, Unregistered
    call("register-token", *register("held", TOKENS[1]))
    call("register-token", *register("held", TOKENS[2]), refused=True)  # over max_tokens 1: a quota refusal
    call("start", *start("held", "check-3", TOKENS[1]))  # 403 InvalidProviderToken: the app is held
    call("start", *start("held", "check-4", TOKENS[1]), refused=True)  # its held push fills its queue (capacity 1)


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return response.read().decode()


def families(exposition):
    """{family: (type, {label names})} of a /metrics body: the `# TYPE` lines and the labels of their samples."""
    found = {}
    for line in exposition.splitlines():
        typed = re.match(r"# TYPE (\S+) (\S+)", line)
        if typed:
            found.setdefault(typed[1], (typed[2], set()))
            continue
        if not line or line.startswith("#"):
            continue
        sample = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?", line)
        name, labels = sample[1], set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', sample[2] or ""))
        family = family_of(name, found)
        if family is None:
            found[name] = ("untyped", labels)
        else:
            found[family][1].update(labels)
    return found


def family_of(name, known):
    """The family `name` belongs to: itself, or a histogram's or summary's for its _bucket, _sum, _count series."""
    if name in known:
        return name
    for suffix in ("_bucket", "_sum", "_count"):
        base = name.removesuffix(suffix)
        if base != name and known.get(base, ("",))[0] in ("histogram", "summary"):
            return base
    return None


# Families traffic must have created before the scrape is compared (the rest exist from the start).
AFTER_TRAFFIC = ['liverelay_dispatch_app_held{app="held"} 1', 'liverelay_dispatch_pushes_total{app="good",outcome="pruned"',
                 "liverelay_quota_refused_total{",
                 "liverelay_dispatch_refused_calls_total{", "liverelay_store_commit_duration_bucket{",
                 'liverelay_webhook_deliveries_total{app="good",outcome="delivered"} ',
                 'liverelay_webhook_deliveries_total{app="held",outcome="failed"} ',
                 'liverelay_webhook_events_delivered_total{app="good"} ', 'liverelay_webhook_failing{app="held"} 1']


def live_families(binary):
    with tempfile.TemporaryDirectory(prefix="check-dashboards-") as work:
        api_key = write_setup(work)
        deadline = time.monotonic() + SERVER_SECONDS
        children = []
        try:
            mock = Child("mock-apns", [binary, "mock-apns", "--config", str(pathlib.Path(work, "mock.json")),
                                       "--log-level", "warning"], work)
            children.append(mock)
            serve_config(work, mock.port("mock APNs listening on", deadline))
            admin_key = bootstrap_admin(binary, work)
            receiver = WebhookReceiver(work, deadline)
            children.append(receiver)
            server = Child("serve", [binary, "serve", "--config", str(pathlib.Path(work, "serve.json")),
                                     "--log-level", "warning"], work)
            children.append(server)
            rpc_port = server.port("listening on", deadline)
            ops_port = server.port("ops listening on", deadline)
            webhooks(binary, work, rpc_port, admin_key, receiver.port)  # before the traffic: its events are theirs
            traffic(binary, work, rpc_port, api_key)
            while True:
                body = scrape(ops_port)
                missing = [series for series in AFTER_TRAFFIC if series not in body]
                if not missing:
                    return families(body)
                if time.monotonic() > deadline:
                    raise RuntimeError(f"after the traffic, /metrics still lacks {missing}:\n{server.transcript()}")
                time.sleep(0.5)
        finally:
            for child in reversed(children):
                child.stop()


def declared_in_sources(name):
    """Whether a Swift source names the metric `name` (or the histogram it is a series of) as a string literal."""
    bases = {name} | {name.removesuffix(suffix) for suffix in ("_bucket", "_sum", "_count")}
    for path in (ROOT / "Sources").rglob("*.swift"):
        text = path.read_text(errors="replace")
        if any(f'"{base}"' in text for base in bases):
            return True
    return False


def compare(exprs, label_values, exported):
    for where, expr in exprs:
        names, selected, grouping = parse(expr)
        labels_of = {}
        for name in sorted(names):
            if name in PROMETHEUS_NAMES:
                labels_of[name] = set(TARGET_LABELS)
                continue
            family = family_of(name, exported)
            if family is None:
                problem(f"{where}: {name} is not exported by liverelay serve" + (
                    " (Sources declare it, but this check's traffic did not make it: extend traffic() here)"
                    if declared_in_sources(name) else ""))
                continue
            kind, labels = exported[family]
            if kind == "histogram" and name == family:
                problem(f"{where}: {name} is a histogram: name its _bucket, _sum or _count series")
            labels_of[name] = (labels if name.endswith("_bucket") else labels - {"le"}) | TARGET_LABELS
        for metric, labels in selected:
            if metric in labels_of:
                for label in labels:
                    if label not in labels_of[metric]:
                        problem(f"{where}: {metric} has no label {label} (it has {sorted(labels_of[metric])})")
        every = set().union(*labels_of.values()) if labels_of else set()
        for label in grouping:
            if labels_of and label not in every:
                problem(f"{where}: no metric of the expression has the label {label} it groups or matches by")
    for where, metric, label in label_values:
        family = family_of(metric, exported)
        if family is not None and label not in exported[family][1] | TARGET_LABELS:
            problem(f"{where}: {metric} has no label {label}")


def main():
    offline = sys.argv[1:] == ["--no-server"]
    if sys.argv[1:] and not offline:
        sys.exit(f"usage: {sys.argv[0]} [--no-server]")
    alerts = rule_expressions() + test_series()
    exprs, label_values = dashboard_expressions()
    check_with_promtool(exprs)
    for where, expr in alerts + exprs:
        if not parse(expr)[0]:
            problem(f"{where}: names no metric: {expr}")
    checked = len(alerts) + len(exprs)
    if not offline:
        binary = os.environ.get("LIVERELAY_BIN", str(ROOT / ".build/debug/liverelay"))
        if not os.access(binary, os.X_OK):
            problem(f"{binary} is missing: swift build --product liverelay")
        else:
            try:
                exported = live_families(binary)
            except (RuntimeError, OSError, subprocess.SubprocessError) as error:
                problem(f"the live server: {error}")
            else:
                compare(alerts + exprs, label_values, exported)
                print(f"check-dashboards: {checked} expressions against {len(exported)} metric families of a live server")
    if problems:
        print(f"check-dashboards: {len(problems)} problems")
        sys.exit(1)
    print(f"check-dashboards: ok ({len(alerts)} rules and test series, {len(exprs)} dashboard queries"
          f"{', no server' if offline else ''})")


if __name__ == "__main__":
    main()
