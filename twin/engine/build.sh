#!/usr/bin/env bash
# Build the twin's SGLang stand-in image from a local base image (no registry).
#
#   build.sh [--version V] [--pyc-mode timestamp|unchecked-hash] [--tag T]
#
# Defaults: --version 0.5.9, --pyc-mode timestamp; tag sparkfleet-twin/sglang:V, or
# sparkfleet-twin/sglang:V-unchecked-pyc for unchecked-hash pycs. The wheel is fetched
# once into .cache/sglang-wheels/ (pip download --no-deps), the real tokenizer_manager.py
# and watchdog.py are extracted on the host and COPY'd. The image label
# sparkfleet.twin.inputs carries the hash of every input; a current image is kept.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BASE_IMAGE=${SPARKSIM_BASE_IMAGE:-sparkfleet-twin/base:bookworm}
WHEEL_DIR=${SPARKFLEET_SGLANG_WHEELS:-$root/.cache/sglang-wheels}
version=0.5.9
pyc_mode=timestamp
tag=

log() { printf 'twin-engine: %s\n' "$*"; }
die() { log "$*" >&2; exit 1; }
usage() { sed -n '2,11s/^# \{0,1\}//p' "$0"; }

while (($#)); do
  case "$1" in
    --version) version=${2:?--version needs a value}; shift 2 ;;
    --pyc-mode) pyc_mode=${2:?--pyc-mode needs a value}; shift 2 ;;
    --tag) tag=${2:?--tag needs a value}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
case "$pyc_mode" in
  timestamp) : "${tag:=sparkfleet-twin/sglang:$version}" ;;
  unchecked-hash) : "${tag:=sparkfleet-twin/sglang:$version-unchecked-pyc}" ;;
  *) die "--pyc-mode must be timestamp or unchecked-hash, not $pyc_mode" ;;
esac

python=python3
[[ -x "$root/.venv/bin/python" ]] && python="$root/.venv/bin/python"

find_wheel() { find "$WHEEL_DIR" -maxdepth 1 -name "sglang-$version-*.whl" -print -quit; }

fetch_wheel() {
  local found
  mkdir -p "$WHEEL_DIR"
  found=$(find_wheel)
  if [[ -z "$found" ]]; then
    (
      flock 9
      [[ -n "$(find_wheel)" ]] && exit 0
      log "downloading sglang==$version into $WHEEL_DIR" >&2
      work=$(mktemp -d "$WHEEL_DIR/.download-XXXXXX")
      trap 'rm -rf "$work"' EXIT
      "$python" -m pip download -q --no-deps --disable-pip-version-check \
        "sglang==$version" -d "$work" >&2
      mv "$work"/sglang-"$version"-*.whl "$WHEEL_DIR/"
    ) 9>"$WHEEL_DIR/.lock"
    found=$(find_wheel)
  fi
  [[ -n "$found" ]] || die "no wheel for sglang==$version in $WHEEL_DIR"
  printf '%s\n' "$found"
}

docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 \
  || die "base image $BASE_IMAGE is missing: run twin/images/build.sh base"
wheel=$(fetch_wheel)
base_id=$(docker image inspect -f '{{.Id}}' "$BASE_IMAGE")
inputs=$(
  {
    printf 'version=%s pyc=%s base=%s\n' "$version" "$pyc_mode" "$base_id"
    sha256sum "$wheel" | cut -d' ' -f1
    cd "$here"
    find Dockerfile build.sh extract.py sglang sparksim -type f \
      ! -name '*.pyc' ! -path '*/__pycache__/*' | LC_ALL=C sort | xargs sha256sum
  } | sha256sum | cut -c1-16
)
current=$(docker image inspect -f '{{ index .Config.Labels "sparkfleet.twin.inputs" }}' "$tag" 2>/dev/null || true)
if [[ "$current" == "$inputs" ]]; then
  log "$tag is current ($inputs)"
  exit 0
fi

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
"$python" "$here/extract.py" --wheel "$wheel" --out "$ctx" >/dev/null
cp "$here/Dockerfile" "$ctx/"
cp "$here/sglang/__init__.py" "$here/sglang/launch_server.py" "$ctx/sglang/"
# The stand-in's sglang.srt.server_args (upstream's parser API on flags.json): what the
# launcher's check imports to parse a rank's arguments.
mkdir -p "$ctx/sglang/srt"
cp "$here/sglang/srt/server_args.py" "$ctx/sglang/srt/"
printf '__version__ = "%s"\n' "$version" >"$ctx/sglang/version.py"
mkdir -p "$ctx/sparksim"
find "$here/sparksim" -maxdepth 1 -name '*.py' -exec cp {} "$ctx/sparksim/" \;
printf '/opt/sparksim\n/sgl-workspace/sglang/python\n' >"$ctx/sparksim.pth"
# Fixed modification times: the timestamp-mode pycs of our own files stay the same.
find "$ctx/sparksim" "$ctx/sglang/__init__.py" "$ctx/sglang/launch_server.py" \
  "$ctx/sglang/srt/server_args.py" \
  "$ctx/sglang/version.py" "$ctx/sglang/flags.json" "$ctx/sparksim.pth" \
  -exec touch -d @0 {} +

log "building $tag (sglang $version, $pyc_mode pycs)"
DOCKER_BUILDKIT=0 docker build -q \
  --build-arg "BASE=$BASE_IMAGE" \
  --build-arg "PYC_MODE=$pyc_mode" \
  --build-arg "SGLANG_VERSION=$version" \
  --label "sparkfleet.twin.inputs=$inputs" \
  --label "sparkfleet.twin.sglang-version=$version" \
  --label "sparkfleet.twin.pyc-mode=$pyc_mode" \
  -t "$tag" "$ctx" >"$ctx.log" 2>&1 || { cat "$ctx.log" >&2; rm -f "$ctx.log"; exit 1; }
rm -f "$ctx.log"
log "built $tag ($(docker image inspect -f '{{.Size}}' "$tag" | numfmt --to=iec))"
