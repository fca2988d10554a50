#!/usr/bin/env python3
"""The rules between the files of Deploy/ that no linter knows (run by scripts/check-deploy.sh).

Every config file parses and would load (known keys at the top, API key files
well formed); the grace periods cover the whole shutdown (preStop, drain time,
the dispatcher's drain grace) with a margin; the ops port is
reachable where probes need it; the paths a config names are mounted; the
mock APNs is the one the compose config pushes to; kustomization.yaml lists
every manifest; every Prometheus alert has a `for:`, a severity, a summary and a
description, and Deploy/README.md explains it. Prints one line per problem;
exits 1 if there is any.
"""
import json
import pathlib
import re
import sys

import yaml  # PyYAML: installed with yamllint

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "Deploy"
# ServeConfigurationFile.CodingKeys: serve refuses any other key.
TOP_KEYS = {"listen", "ops", "tls", "insecure_plaintext", "data_dir", "api_key_file", "limits",
            "null_service", "store", "apps", "dispatch", "admission"}
METHODS = {"RegisterToken", "StartActivity", "UpdateActivity", "EndActivity", "Ping", "CreateChannel", "ListChannels",
           "DeleteChannel", "ListEvents"}
problems = []


def check(ok, message):
    if not ok:
        problems.append(message)


def server_config(text, where):
    config = json.loads(text)
    check(set(config) <= TOP_KEYS, f"{where}: unknown keys {sorted(set(config) - TOP_KEYS)}")
    check("tls" in config, f"{where}: no tls section")
    return config


def drain_seconds(config):
    return config.get("limits", {}).get("drain_time_ms", 30000) / 1000


# After the RPC drain the dispatcher keeps sending what is queued for its drain
# grace (DispatcherConfiguration.drainGracePeriod, which serve does not change),
# then the store closes: a grace period must cover both, and this margin more
# for the store's close and a slow exit, or SIGKILL lands mid-shutdown.
MARGIN_SECONDS = 10


def dispatcher_grace_seconds():
    source = (ROOT / "Sources/LiveRelayDispatch/DispatchConfiguration.swift").read_text()
    found = re.search(r"drainGracePeriod: TimeAmount = \.seconds\((\d+)\)", source)
    if found is None:
        raise ValueError("no `drainGracePeriod: TimeAmount = .seconds(N)` default in DispatchConfiguration.swift")
    return int(found[1])


def shutdown_seconds(config):
    """What stopping a node may take after SIGTERM, with the margin."""
    return drain_seconds(config) + dispatcher_grace_seconds() + MARGIN_SECONDS


def api_keys(text, where):
    for key in json.loads(text)["keys"]:
        name = f"{where}: key {key.get('key_id')}"
        check(re.fullmatch(r"[a-z2-7]{12}", key["key_id"]) is not None, f"{name}: key_id is not 12 base32 characters")
        check(re.fullmatch(r"[0-9a-f]{64}", key["secret_sha256"]) is not None, f"{name}: secret_sha256 is not 64 hex")
        check(bool(key.get("app_ids")) != bool(key.get("all_apps")), f"{name}: give a non-empty app_ids or all_apps: true")
        check(set(key["allowed_methods"]) <= METHODS, f"{name}: unknown methods")
        check("created_at" in key, f"{name}: no created_at")


def seconds(duration):  # compose durations such as "45s", "1m30s"
    return sum(int(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in re.findall(r"(\d+)([hms])", duration))


def compose():
    spec = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    config = server_config((DEPLOY / "compose/config.json").read_text(), "compose/config.json")
    check(config["ops"]["host"] == "0.0.0.0", "compose/config.json: ops must bind 0.0.0.0 to be published")
    mock = spec["services"]["mock-apns"]["command"]
    options = dict(arg[2:].split("=", 1) for arg in mock if arg.startswith("--"))
    for app in config["apps"]:
        apns = app["apns"]
        check(apns["endpoint"] == f"mock-apns:{options['port']}", f"compose: app {app['id']} does not push to the mock")
        expected = f"{app['bundle_id']},{apns['team_id']},{apns['key_id']},"
        check(options["app"].startswith(expected), f"compose.yaml: the mock's --app does not match app {app['id']}")
    mock_mounted = {f"/run/secrets/{s}" for s in spec["services"]["mock-apns"]["secrets"]}
    for path in (options["cert"], options["key"], options["app"].split(",")[-1]):
        check(path in mock_mounted, f"compose.yaml: mock-apns does not mount {path}")
    paths = [config["tls"]["certificate"], config["tls"]["private_key"], config["api_key_file"]]
    paths += [path for app in config["apps"] for path in (app["apns"]["key_file"], app["apns"]["trust_certificate"])]
    for name in ("relay1", "relay2"):
        relay = spec["services"][name]
        check(seconds(relay["stop_grace_period"]) >= shutdown_seconds(config),
              f"compose.yaml: {name}'s stop_grace_period must be at least limits.drain_time_ms + the dispatcher's"
              f" drain grace + {MARGIN_SECONDS} s ({shutdown_seconds(config):g} s)")
        mounted = {f"/run/secrets/{s}" for s in relay["secrets"]} | {c["target"] for c in relay["configs"]}
        for path in paths:
            check(path in mounted, f"compose.yaml: {name} does not mount {path}")
        check("/etc/liverelay/config.json" in mounted, f"compose.yaml: {name} does not mount the config")
    for service in spec["services"].values():
        for secret in service.get("secrets", []):
            check(secret in spec["secrets"], f"compose.yaml: secret {secret} is not declared")


def kubernetes():
    folder = DEPLOY / "kubernetes"
    listed = yaml.safe_load((folder / "kustomization.yaml").read_text())["resources"]
    present = sorted(p.name for p in folder.glob("*.yaml") if p.name != "kustomization.yaml")
    check(sorted(listed) == present, f"kustomization.yaml lists {sorted(listed)}, the folder holds {present}")
    docs = {}
    for path in present:
        for doc in yaml.safe_load_all((folder / path).read_text()):
            docs[(doc["kind"], doc["metadata"]["name"])] = doc
    data = docs[("ConfigMap", "liverelay-config")]["data"]
    config = server_config(data["config.json"], "configmap.yaml config.json")
    api_keys(data["api-keys.json"], "configmap.yaml api-keys.json")
    pod = docs[("Deployment", "liverelay")]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    check(config["ops"] == {"host": "0.0.0.0", "port": ports["ops"]},
          "configmap.yaml: ops must be {host: 0.0.0.0, port: <the ops containerPort>} for the probes")
    check(config["listen"]["port"] == ports["rpc"], "configmap.yaml: listen.port is not the rpc containerPort")
    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    pre_stop_seconds = int(pre_stop[1]) if pre_stop[0] == "sleep" else 0
    check(pod["terminationGracePeriodSeconds"] >= pre_stop_seconds + shutdown_seconds(config),
          "deployment.yaml: terminationGracePeriodSeconds must be at least the preStop sleep + drain_time_ms + the"
          f" dispatcher's drain grace + {MARGIN_SECONDS} s ({pre_stop_seconds + shutdown_seconds(config):g} s)")
    # Every file the config names is in a mounted volume that has it.
    volumes = {v["name"]: v for v in pod["volumes"]}
    files = set()
    for mount in container["volumeMounts"]:
        volume = volumes[mount["name"]]
        if "secret" in volume:
            secret = docs[("Secret", volume["secret"]["secretName"])]
            keys = set(secret.get("stringData", {})) | set(secret.get("data", {}))
        elif "configMap" in volume:
            keys = set(docs[("ConfigMap", volume["configMap"]["name"])]["data"])
        else:
            continue
        files |= {f"{mount['mountPath']}/{k}" for k in keys}
    paths = [config["tls"]["certificate"], config["tls"]["private_key"], config["api_key_file"]]
    paths += [app["apns"]["key_file"] for app in config["apps"]]
    for path in paths:
        check(path in files, f"deployment.yaml: {path} (configmap.yaml config.json) is not mounted")
    for env in container["env"]:
        ref = env["valueFrom"]["secretKeyRef"]
        check(ref["key"] in docs[("Secret", ref["name"])]["stringData"], f"deployment.yaml: no {ref} for {env['name']}")


def systemd():
    config = server_config((DEPLOY / "systemd/config.json").read_text(), "systemd/config.json")
    unit = {}
    for line in (DEPLOY / "systemd/liverelay.service").read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            unit.setdefault(key, []).append(value)
    check(int(unit["TimeoutStopSec"][0]) >= shutdown_seconds(config),
          f"liverelay.service: TimeoutStopSec must be at least drain_time_ms + the dispatcher's drain grace +"
          f" {MARGIN_SECONDS} s ({shutdown_seconds(config):g} s)")
    check("time-sync.target" in " ".join(unit.get("After", [])),
          "liverelay.service: After= must name time-sync.target (the sweep and provider tokens read the wall clock)")
    check(int(unit["LimitNOFILE"][0]) > config["limits"]["max_connections"],
          "liverelay.service: LimitNOFILE must exceed limits.max_connections")
    credentials = {c.split(":", 1)[0] for c in unit.get("LoadCredential", [])}
    paths = [config["tls"]["certificate"], config["tls"]["private_key"]] + [a["apns"]["key_file"] for a in config["apps"]]
    for path in paths:
        name = path.removeprefix("/run/credentials/liverelay.service/")
        check(name in credentials, f"systemd/config.json: {path} has no LoadCredential={name}:...")


def prometheus():
    """Every alert waits (`for:`), says how urgent it is, tells what to do, and is explained in Deploy/README.md."""
    readme = (DEPLOY / "README.md").read_text()
    section = readme.split("## Alerts and dashboard", 1)[1].split("\n## ", 1)[0] if "## Alerts and dashboard" in readme else ""
    check(section != "", "Deploy/README.md: no \"## Alerts and dashboard\" section")
    for group in yaml.safe_load((DEPLOY / "prometheus/alerts.yaml").read_text())["groups"]:
        for rule in group["rules"]:
            name = rule.get("alert")
            if name is None:
                continue
            where = f"prometheus/alerts.yaml: {name}"
            check("for" in rule, f"{where}: no for:")
            check(rule.get("labels", {}).get("severity") in ("critical", "warning"), f"{where}: severity is not critical or warning")
            annotations = rule.get("annotations", {})
            check(bool(annotations.get("summary")) and bool(annotations.get("description")),
                  f"{where}: a summary and a description annotation are needed")
            check("Deploy/README.md" in annotations.get("description", ""), f"{where}: the description does not point at Deploy/README.md")
            check(f"`{name}`" in section, f"Deploy/README.md, \"Alerts and dashboard\", does not explain {name}")


for part in (compose, kubernetes, systemd, prometheus):
    try:
        part()
    except (KeyError, IndexError, ValueError, TypeError) as error:  # a missing or malformed field
        problems.append(f"{part.__name__}: cannot read the files: {type(error).__name__} {error}")
for problem in problems:
    print(problem)
sys.exit(1 if problems else 0)
