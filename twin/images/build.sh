#!/usr/bin/env bash
# Build the twin's images locally (no registry is reachable):
#   base    debootstrap'ed Debian bookworm with python3 and network tools
#   node    a simulated DGX Spark: base + cron, sshd, flock, rsync, curl, dockerd
#   node-ssh  node + sudo and a non-root operator (tiger), for the ssh inventories
#   engine  the SGLang stand-in (twin/engine/build.sh): 0.5.9, its unchecked-hash
#           .pyc variant, and 0.5.12
#   mirror  the Hugging Face mirror (olah from pinned wheels, the twin's model repos)
#   prometheus  the site's Prometheus and Alertmanager (Debian's packages)
# Each image carries a label with the hash of its inputs and is rebuilt only when
# they change. Usage: build.sh [base|node|node-ssh|engine|mirror|prometheus|all]...
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BASE_IMAGE=${SPARKSIM_BASE_IMAGE:-sparkfleet-twin/base:bookworm}
NODE_IMAGE=${SPARKSIM_NODE_IMAGE:-sparkfleet-twin/node:bookworm}
NODE_SSH_IMAGE=${SPARKSIM_NODE_SSH_IMAGE:-sparkfleet-twin/node-ssh:bookworm}
MIRROR_IMAGE=${SPARKSIM_MIRROR_IMAGE:-sparkfleet-twin/mirror:olah}
PROMETHEUS_IMAGE=${SPARKSIM_PROMETHEUS_IMAGE:-sparkfleet-twin/prometheus:bookworm}
MIRROR_WHEELS=${SPARKSIM_MIRROR_WHEELS:-$root/.cache/mirror-wheels}
base_packages=python3,iproute2,iputils-ping,procps,ca-certificates,tini

log() { printf 'twin-images: %s\n' "$*"; }

inputs_hash() { cat "$@" | sha256sum | cut -c1-16; }

current_label() {
  docker image inspect -f '{{ index .Config.Labels "sparkfleet.twin.inputs" }}' "$1" 2>/dev/null || true
}

apt_mirror() {
  local uri
  uri=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  if [[ -z "$uri" ]]; then
    uri=$(awk '/^deb / {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  fi
  [[ -n "$uri" ]] || { log "no apt mirror found in /etc/apt/sources.list.d/debian.sources"; exit 1; }
  printf '%s\n' "$uri"
}

build_base() {
  local want rootfs mirror
  want=$(printf '%s\n' "$base_packages" | cat - "$here/build.sh" | sha256sum | cut -c1-16)
  if [[ "$(current_label "$BASE_IMAGE")" == "$want" ]]; then
    log "$BASE_IMAGE is current"
    return
  fi
  mirror=$(apt_mirror)
  rootfs=$(mktemp -d /var/tmp/sparksim-rootfs.XXXXXX)
  trap 'rm -rf "$rootfs"' RETURN
  log "debootstrap bookworm from $mirror (about a minute)"
  debootstrap --variant=minbase --include="$base_packages" bookworm "$rootfs" "$mirror" >"$rootfs.log" 2>&1 || {
    tail -n 30 "$rootfs.log" >&2
    exit 1
  }
  rm -f "$rootfs.log"
  rm -rf "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
    "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb
  find "$rootfs"/usr/share/locale -mindepth 1 -maxdepth 1 ! -name 'locale.alias' -exec rm -rf {} +
  tar -C "$rootfs" -c . | docker import \
    -c "LABEL sparkfleet.twin.inputs=$want" \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -c 'CMD ["/bin/bash"]' - "$BASE_IMAGE" >/dev/null
  log "built $BASE_IMAGE ($(docker image inspect -f '{{.Size}}' "$BASE_IMAGE" | numfmt --to=iec))"
}

build_node() {
  local want
  want=$( { current_label "$BASE_IMAGE"; cat "$here/node/Dockerfile" "$here/node/sparksim-init" "$root/twin/tools/gidtable.py"; } | sha256sum | cut -c1-16)
  if [[ "$(current_label "$NODE_IMAGE")" == "$want" ]]; then
    log "$NODE_IMAGE is current"
    return
  fi
  local ctx
  ctx=$(mktemp -d)
  trap 'rm -rf "$ctx"' RETURN
  cp "$here/node/Dockerfile" "$here/node/sparksim-init" "$root/twin/tools/gidtable.py" "$ctx/"
  log "building $NODE_IMAGE (apt inside the build, about a minute)"
  DOCKER_BUILDKIT=0 docker build -q --build-arg "BASE=$BASE_IMAGE" --label "sparkfleet.twin.inputs=$want" \
    -t "$NODE_IMAGE" "$ctx" >/dev/null
  log "built $NODE_IMAGE ($(docker image inspect -f '{{.Size}}' "$NODE_IMAGE" | numfmt --to=iec))"
}

# The node reached over ssh as a non-root user with sudo (inventory/sim-ssh).
build_node_ssh() {
  local want
  want=$( { current_label "$NODE_IMAGE"; cat "$here/node-ssh/Dockerfile"; } | sha256sum | cut -c1-16)
  if [[ "$(current_label "$NODE_SSH_IMAGE")" == "$want" ]]; then
    log "$NODE_SSH_IMAGE is current"
    return
  fi
  log "building $NODE_SSH_IMAGE (sudo and the operator account)"
  DOCKER_BUILDKIT=0 docker build -q --build-arg "NODE=$NODE_IMAGE" --label "sparkfleet.twin.inputs=$want" \
    -t "$NODE_SSH_IMAGE" "$here/node-ssh" >/dev/null
  log "built $NODE_SSH_IMAGE"
}

build_mirror() {
  local want ctx python=python3
  [[ -x "$root/.venv/bin/python" ]] && python="$root/.venv/bin/python"
  want=$( { current_label "$BASE_IMAGE"; cat "$root"/twin/mirror/*; } | sha256sum | cut -c1-16)
  if [[ "$(current_label "$MIRROR_IMAGE")" == "$want" ]]; then
    log "$MIRROR_IMAGE is current"
    return
  fi
  mkdir -p "$MIRROR_WHEELS"
  # The base image's python is 3.11 like this host's: wheels fetched here install there.
  log "fetching the mirror's pinned wheels into $MIRROR_WHEELS"
  "$python" -m pip download -q --disable-pip-version-check --only-binary=:all: \
    -r "$root/twin/mirror/requirements.txt" -d "$MIRROR_WHEELS" >&2
  ctx=$(mktemp -d)
  trap 'rm -rf "$ctx"' RETURN
  cp "$root"/twin/mirror/* "$ctx/"
  cp -r "$MIRROR_WHEELS" "$ctx/wheels"
  log "building $MIRROR_IMAGE"
  DOCKER_BUILDKIT=0 docker build -q --build-arg "BASE=$BASE_IMAGE" --label "sparkfleet.twin.inputs=$want" \
    -t "$MIRROR_IMAGE" "$ctx" >/dev/null
  log "built $MIRROR_IMAGE ($(docker image inspect -f '{{.Size}}' "$MIRROR_IMAGE" | numfmt --to=iec))"
}

build_prometheus() {
  local want
  want=$( { current_label "$BASE_IMAGE"; cat "$root"/twin/prometheus/*; } | sha256sum | cut -c1-16)
  if [[ "$(current_label "$PROMETHEUS_IMAGE")" == "$want" ]]; then
    log "$PROMETHEUS_IMAGE is current"
    return
  fi
  log "building $PROMETHEUS_IMAGE (apt inside the build)"
  DOCKER_BUILDKIT=0 docker build -q --build-arg "BASE=$BASE_IMAGE" --label "sparkfleet.twin.inputs=$want" \
    -t "$PROMETHEUS_IMAGE" "$root/twin/prometheus" >/dev/null
  log "built $PROMETHEUS_IMAGE ($(docker image inspect -f '{{.Size}}' "$PROMETHEUS_IMAGE" | numfmt --to=iec))"
}

build_engine() {
  "$root/twin/engine/build.sh"
  "$root/twin/engine/build.sh" --pyc-mode unchecked-hash
  # A newer release, whose patch anchors sit elsewhere: a new image pin on the twin.
  "$root/twin/engine/build.sh" --version 0.5.12
  # The release with the exact (12, 0) is_sm120() gate (DS4-F canary on the 2-node twin).
  "$root/twin/engine/build.sh" --version 0.5.23
}

targets=("$@")
((${#targets[@]})) || targets=(all)
for target in "${targets[@]}"; do
  case "$target" in
    base) build_base ;;
    node) build_base; build_node ;;
    node-ssh) build_base; build_node; build_node_ssh ;;
    engine) build_base; build_engine ;;
    mirror) build_base; build_mirror ;;
    prometheus) build_base; build_prometheus ;;
    all) build_base; build_node; build_node_ssh; build_engine; build_mirror; build_prometheus ;;
    *) log "unknown target $target (base|node|node-ssh|engine|mirror|prometheus|all)"; exit 2 ;;
  esac
done
