#!/usr/bin/env bash
# Install and start what the twin and the tests need on a fresh Debian 12 machine:
# docker.io (daemon), debootstrap (node images), shellcheck (lint), promtool (alert rule
# tests). Idempotent.
set -euo pipefail

log() { printf 'host-deps: %s\n' "$*"; }

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
command -v shellcheck >/dev/null 2>&1 || missing+=(shellcheck)
if ((${#missing[@]})); then
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  log "docker.io, debootstrap and shellcheck present"
fi

# promtool (the alert rules' tests): Debian's prometheus package, unpacked for that one
# binary; installing the package would start a Prometheus server on this machine.
if ! command -v promtool >/dev/null 2>&1; then
  log "installing promtool from Debian's prometheus package"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  (cd "$work" && apt-get download -qq prometheus 2>/dev/null) || {
    apt-get update -qq
    (cd "$work" && apt-get download -qq prometheus)
  }
  dpkg-deb -x "$work"/prometheus_*.deb "$work/root"
  install -m 0755 "$work/root/usr/bin/promtool" /usr/local/bin/promtool
fi

if docker info >/dev/null 2>&1; then
  log "dockerd answers"
  exit 0
fi
log "starting dockerd (log: /var/log/sparkfleet-dockerd.log)"
nohup setsid dockerd >>/var/log/sparkfleet-dockerd.log 2>&1 </dev/null &
for _ in $(seq 1 150); do
  if docker info >/dev/null 2>&1; then
    log "dockerd up"
    exit 0
  fi
  sleep 0.2
done
log "dockerd did not answer within 30 s; see /var/log/sparkfleet-dockerd.log"
tail -n 20 /var/log/sparkfleet-dockerd.log >&2 || true
exit 1
