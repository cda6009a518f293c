#!/usr/bin/env bash
# Install and start what the twin and the tests need on a fresh Debian 12 machine:
# docker.io (daemon), debootstrap (node images), shellcheck (lint). Idempotent.
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
