#!/usr/bin/env bash
# Start olah (offline, local repositories only) on loopback, then the front on :8090.
set -euo pipefail
mkdir -p /var/lib/olah/repos /var/log/sparksim
cd /var/lib/olah
/opt/olah/bin/olah-cli -c /opt/sparksim-mirror/olah.toml >>/var/log/sparksim/olah.log 2>&1 &
for _ in $(seq 1 100); do
  python3 -c 'import socket; socket.create_connection(("127.0.0.1", 8091), 1)' 2>/dev/null && break
  sleep 0.1
done
echo "sparksim-mirror: olah answers on 127.0.0.1:8091"
exec python3 /opt/sparksim-mirror/front.py 0.0.0.0 8090
