#!/usr/bin/env bash
# Makes the secrets Deploy/compose.yaml mounts, with openssl, into
# Deploy/compose/secrets/ (gitignored; kept out of the image by .dockerignore):
#
#   tls-cert.pem, tls-key.pem          the relays' RPC certificate (self-signed, EC P-256,
#                                      for relay1, relay2, localhost, 127.0.0.1): clients
#                                      trust it with --ca-file
#   mock-apns-cert.pem, -key.pem       the mock APNs' certificate, for the name mock-apns
#                                      (the relays verify it: "trust_certificate")
#   apns-orders.p8                     the app "orders"'s APNs signing key (.p8, PKCS#8);
#                                      the mock gets the same file and uses its public half
#   api-keys.json                      one API key for "orders", every RPC; the key itself
#                                      is printed once, only its SHA-256 is kept
#   postgres-password, liverelay.env   PostgreSQL's password, and LIVERELAY_POSTGRES_URL
#
# Existing files are kept (run again after deleting one to remake it).
set -euo pipefail
dir="$(cd "$(dirname "$0")" && pwd)/secrets"
mkdir -p "$dir"
# The directory keeps other host users out; the files are 0644 because compose
# bind-mounts them as they are, and the containers run as uid 10001, not as
# their owner. Keep this directory on a single-user machine only.
chmod 700 "$dir"
umask 022

# A self-signed EC P-256 certificate with the extensions LiveRelay's own
# development certificates carry. The minimal -config keeps openssl.cnf's
# default (CA) extensions out.
certificate() { # NAME CN SAN
  [ -f "$dir/$1-cert.pem" ] && return 0
  openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$dir/$1-key.pem" -out "$dir/$1-cert.pem" -days 365 -subj "/CN=$2/O=LiveRelay compose" \
    -config <(printf '[req]\ndistinguished_name = dn\n[dn]\n') \
    -addext "basicConstraints = critical, CA:FALSE" \
    -addext "keyUsage = critical, digitalSignature, keyAgreement" \
    -addext "extendedKeyUsage = serverAuth" \
    -addext "subjectAltName = $3" 2>/dev/null
  echo "made $dir/$1-cert.pem ($3)"
}
certificate tls relay1 "DNS:relay1, DNS:relay2, DNS:localhost, IP:127.0.0.1, IP:::1"
certificate mock-apns mock-apns "DNS:mock-apns, DNS:localhost, IP:127.0.0.1"

if [ ! -f "$dir/apns-orders.p8" ]; then
  openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt -out "$dir/apns-orders.p8"
  echo "made $dir/apns-orders.p8"
fi

if [ ! -f "$dir/postgres-password" ]; then
  password="$(openssl rand -hex 24)"
  printf '%s\n' "$password" >"$dir/postgres-password"
  # sslmode=disable: PostgreSQL is reached only over the compose network.
  printf 'LIVERELAY_POSTGRES_URL=postgres://liverelay:%s@postgres:5432/liverelay?sslmode=disable\n' "$password" \
    >"$dir/liverelay.env"
  echo "made $dir/postgres-password and liverelay.env"
fi

# A key is lrk_<key id>_<secret>: the key id is 12 lowercase base32 characters,
# the secret 64 hex digits, and the file keeps the SHA-256 of the secret's text.
if [ ! -f "$dir/api-keys.json" ]; then
  key_id="$(openssl rand 10 | base32 | tr 'A-Z' 'a-z' | cut -c1-12)"
  secret="$(openssl rand -hex 32)"
  hash="$(printf %s "$secret" | sha256sum | cut -d' ' -f1)"
  cat >"$dir/api-keys.json" <<JSON
{
  "keys": [{
    "key_id": "$key_id",
    "secret_sha256": "$hash",
    "app_ids": ["orders"],
    "allowed_methods": ["RegisterToken", "StartActivity", "UpdateActivity", "EndActivity", "Ping",
                        "CreateChannel", "ListChannels", "DeleteChannel", "ListEvents"],
    "created_at": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
    "label": "compose example, app orders"
  }]
}
JSON
  echo "made $dir/api-keys.json; the API key for app orders (shown only now):"
  echo
  echo "export LIVERELAY_API_KEY=lrk_${key_id}_${secret}"
  echo
fi
# openssl writes private keys 0600; see the note on modes above.
chmod 644 "$dir"/*
