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
  image_current "$BASE_IMAGE" "$want" && return
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

# Is IMAGE labelled with WANT, the hash of its inputs? (Logged either way.)
image_current() {
  if [[ "$(current_label "$1")" == "$2" ]]; then
    log "$1 is current"
    return 0
  fi
  return 1
}

# Build IMAGE from the context directory CTX on top of PARENT (build argument ARG), labelled
# with WANT, the hash of its inputs.
build_image() {
  local image=$1 want=$2 ctx=$3 arg=$4 parent=$5 what=$6
  log "building $image ($what)"
  DOCKER_BUILDKIT=0 docker build -q --build-arg "$arg=$parent" --label "sparkfleet.twin.inputs=$want" \
    -t "$image" "$ctx" >/dev/null
  log "built $image ($(docker image inspect -f '{{.Size}}' "$image" | numfmt --to=iec))"
}

# The hash of an image's inputs: its parent's label and the files it is built from.
inputs_of() {
  local parent=$1
  shift
  { current_label "$parent"; cat "$@"; } | sha256sum | cut -c1-16
}

build_node() {
  local want ctx files=("$here/node/Dockerfile" "$here/node/sparksim-init" "$here/node/sparksim-reboot"
    "$here/node/01-network-manager-all.yaml" "$here/node/sparksim_zipcache.py"
    "$root/twin/tools/gidtable.py" "$root/plugins/module_utils/_netplan.py")
  want=$(inputs_of "$BASE_IMAGE" "${files[@]}")
  image_current "$NODE_IMAGE" "$want" && return
  ctx=$(mktemp -d)
  trap 'rm -rf "$ctx"' RETURN
  cp "${files[@]}" "$ctx/"
  build_image "$NODE_IMAGE" "$want" "$ctx" BASE "$BASE_IMAGE" "apt inside the build, about a minute"
}

# The node reached over ssh as a non-root user with sudo (inventory/sim-ssh).
build_node_ssh() {
  local want
  want=$(inputs_of "$NODE_IMAGE" "$here"/node-ssh/*)
  image_current "$NODE_SSH_IMAGE" "$want" && return
  build_image "$NODE_SSH_IMAGE" "$want" "$here/node-ssh" NODE "$NODE_IMAGE" "sudo and the operator account"
}

build_mirror() {
  local want ctx python=python3
  [[ -x "$root/.venv/bin/python" ]] && python="$root/.venv/bin/python"
  want=$(inputs_of "$BASE_IMAGE" "$root"/twin/mirror/*)
  image_current "$MIRROR_IMAGE" "$want" && return
  mkdir -p "$MIRROR_WHEELS"
  # The base image's python is 3.11 like this host's: wheels fetched here install there.
  log "fetching the mirror's pinned wheels into $MIRROR_WHEELS"
  "$python" -m pip download -q --disable-pip-version-check --only-binary=:all: \
    -r "$root/twin/mirror/requirements.txt" -d "$MIRROR_WHEELS" >&2
  ctx=$(mktemp -d)
  trap 'rm -rf "$ctx"' RETURN
  cp "$root"/twin/mirror/* "$ctx/"
  cp -r "$MIRROR_WHEELS" "$ctx/wheels"
  build_image "$MIRROR_IMAGE" "$want" "$ctx" BASE "$BASE_IMAGE" "olah from pinned wheels"
}

# The site's Prometheus and Alertmanager (inventory/sim's monitoring).
build_prometheus() {
  local want
  want=$(inputs_of "$BASE_IMAGE" "$root"/twin/prometheus/*)
  image_current "$PROMETHEUS_IMAGE" "$want" && return
  build_image "$PROMETHEUS_IMAGE" "$want" "$root/twin/prometheus" BASE "$BASE_IMAGE" \
    "Debian's prometheus and prometheus-alertmanager"
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
