#!/usr/bin/env python3
"""Writes an API key file holding one operator key (every app, every RPC of the
benchmarks) and prints the key: for the bench scripts that start servers of their own.

    scripts/bench/operator-key.py KEY_FILE LABEL
"""
import hashlib
import json
import secrets
import sys

key_file, label = sys.argv[1], sys.argv[2]
key_id = "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz234567") for _ in range(12))
secret = secrets.token_hex(32)
record = {"key_id": key_id, "secret_sha256": hashlib.sha256(secret.encode()).hexdigest(), "all_apps": True,
          "allowed_methods": ["RegisterToken", "StartActivity", "UpdateActivity", "EndActivity", "Ping"],
          "created_at": "2026-01-01T00:00:00Z", "label": label}
with open(key_file, "w") as f:
    json.dump({"keys": [record]}, f)
print(f"lrk_{key_id}_{secret}")
