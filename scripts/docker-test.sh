#!/usr/bin/env bash
# Build the image from the Dockerfile and run a short comparison inside it, on a machine without a
# Docker engine and without access to an image registry (as root): Debian's podman and buildah, and a
# Debian bookworm base image made locally with debootstrap.
#
#   sudo bash scripts/docker-test.sh
#
# Steps: install podman, buildah and debootstrap if missing; make the base image (cached) and give it
# the names the Dockerfile's FROM lines use; stage the local torch CPU wheel (pip's find-links) and the
# local certificate authorities into the build context's git-ignored folders; build with
# `podman build --isolation chroot --format docker --pull=never` (the Horovod compile takes about 10 minutes on 2 cores;
# later builds reuse the cached layers); print the build time and the image size; run the comparison in
# a container as the image's non-root user, through the image's entry point, with a host directory at
# /results; check report.md, report.json and that parity holds. Exit status 0 only if all of it passed.
#
# Variables:
#   IMAGE           the image to build (default localhost/hvd-compare:test); it is kept afterwards
#   BASE_CACHE      the cached base file system (default /var/cache/hvd-compare/bookworm-base.tar)
#   RESULTS         host directory for /results (default: a new temporary directory, kept)
#   TORCH_WHEEL     the torch wheel to stage (default: torch-<version>+cpu-cp311-* from pip's find-links)
#   TORCH_INDEX_URL passed on to the build when no local wheel is found
#   COMPARE_ARGS    the comparison's options (default: a short one, 20 steps, 2 seeds, np 1 and 2)
#   BUILD_FLAGS     more options for podman build (e.g. --no-cache, to time a build from scratch)
set -euo pipefail

IMAGE=${IMAGE:-localhost/hvd-compare:test}
BASE_CACHE=${BASE_CACHE:-/var/cache/hvd-compare/bookworm-base.tar}
COMPARE_ARGS=${COMPARE_ARGS:---np 1,2 --steps 20 --dataset-size 512 --seeds 0,1 --repeats 4}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

step() { printf '\n==> %s\n' "$*"; }
fail() { printf 'docker-test: FAILED: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || fail "run as root (podman builds and debootstrap need it here)"

# --- tools -----------------------------------------------------------------------------------------
missing=()
for tool in podman buildah debootstrap; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
if [ "${#missing[@]}" -gt 0 ]; then
    step "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
podman --version

# --- cleanup on every exit -------------------------------------------------------------------------
container=""
staged=()
cleanup() {
    [ -n "$container" ] && buildah rm "$container" >/dev/null 2>&1 || true
    for file in "${staged[@]}"; do rm -f "$file"; done
}
trap cleanup EXIT

# --- the base image, under the names the Dockerfile's FROM lines use ------------------------------
bases=$(sed -n -E 's/^ARG (BUILDER|RUNTIME)_IMAGE=(.+)$/\2/p' Dockerfile | sort -u)
[ -n "$bases" ] || fail "no ARG BUILDER_IMAGE=/RUNTIME_IMAGE= default in the Dockerfile"
base_id=""
if podman image exists localhost/hvd-compare-base:bookworm; then
    base_id=localhost/hvd-compare-base:bookworm
else
    if [ ! -s "$BASE_CACHE" ]; then
        step "making a Debian bookworm base with debootstrap (about 2 minutes); cached in $BASE_CACHE"
        mkdir -p "$(dirname "$BASE_CACHE")"
        rootfs=$(mktemp -d "$(dirname "$BASE_CACHE")/rootfs.XXXXXX")
        debootstrap --variant=minbase bookworm "$rootfs" >"$rootfs.log" 2>&1 \
            || { tail -n 20 "$rootfs.log"; rm -rf "$rootfs"; fail "debootstrap"; }
        rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
        tar -C "$rootfs" --numeric-owner -cf "$BASE_CACHE.tmp" .
        mv "$BASE_CACHE.tmp" "$BASE_CACHE"
        rm -rf "$rootfs" "$rootfs.log"
    fi
    step "importing $BASE_CACHE"
    podman import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["bash"]' "$BASE_CACHE" localhost/hvd-compare-base:bookworm >/dev/null
    base_id=localhost/hvd-compare-base:bookworm
fi
for name in $bases; do
    case "$name" in */*/*) full=$name ;; */*) full=docker.io/$name ;; *) full=docker.io/library/$name ;; esac
    podman tag "$base_id" "$full" "localhost/${name##*/}"
    echo "base image $base_id tagged $full"
done

# --- what the build needs from this machine --------------------------------------------------------
build_args=()
python_tag=cp311  # Debian bookworm's python3 is 3.11
torch_version=$(sed -n -E 's/^ARG TORCH_VERSION=(.+)$/\1/p' Dockerfile)
wheel=${TORCH_WHEEL:-}
if [ -z "$wheel" ]; then
    links=$(pip config list 2>/dev/null | sed -n -E "s/^[a-z:.]*find-links='(.*)'$/\1/p" | tr ' ' '\n')
    for dir in ${PIP_FIND_LINKS:-} $links; do
        dir=${dir#file://}
        found=$(ls "$dir"/torch-"$torch_version"+cpu-"$python_tag"-"$python_tag"-*x86_64*.whl 2>/dev/null | head -n 1 || true)
        [ -n "$found" ] && { wheel=$found; break; }
    done
fi
if [ -n "$wheel" ]; then
    file=$(basename "$wheel")
    version=${file#torch-}; version=${version%%-*}       # 2.13.0+cpu
    cp "$wheel" "docker/wheels/$file"
    staged+=("$root/docker/wheels/$file")
    build_args+=(--build-arg "TORCH_VERSION=$version")
    echo "torch: $file staged in docker/wheels/ (TORCH_VERSION=$version)"
else
    echo "torch: no local wheel found; the build asks the package index ${TORCH_INDEX_URL:+($TORCH_INDEX_URL)}"
    [ -n "${TORCH_INDEX_URL:-}" ] && build_args+=(--build-arg "TORCH_INDEX_URL=$TORCH_INDEX_URL")
fi
# A proxy that intercepts TLS: the machine's own certificate authorities, for pip in the builder stage.
for cert in /usr/local/share/ca-certificates/*.crt /usr/local/share/ca-certificates/*/*.crt; do
    [ -f "$cert" ] || continue
    cp "$cert" "docker/certs/$(basename "$cert")"
    staged+=("$root/docker/certs/$(basename "$cert")")
    echo "certificate authority staged: $(basename "$cert")"
done
# A package index set in pip's configuration is reachable from the build only if it is served over
# http(s) (file:// folders are not in the build): pass such an index on.
for key in index-url extra-index-url; do
    urls=$(pip config list 2>/dev/null | sed -n -E "s/^[a-z:.]*$key='(.*)'$/\1/p" | tr ' ' '\n' | grep -E '^https?://' || true)
    [ -n "$urls" ] || continue
    var=PIP_$(echo "$key" | tr 'a-z-' 'A-Z_')
    build_args+=(--build-arg "$var=$(echo "$urls" | paste -sd ' ')")
    echo "pip's $key from this machine's configuration passed to the build"
done

# --- build ------------------------------------------------------------------------------------------
step "building $IMAGE (podman build --isolation chroot; the Horovod compile takes about 10 minutes)"
started=$(date +%s)
read -r -a build_flags <<< "${BUILD_FLAGS:-}"
podman build --isolation chroot --format docker --pull=never -t "$IMAGE" "${build_flags[@]}" "${build_args[@]}" \
    -f Dockerfile . \
    || fail "podman build"
build_s=$(( $(date +%s) - started ))
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
printf 'build time: %dm %02ds\n' $((build_s / 60)) $((build_s % 60))
printf 'image size: %s bytes (%s MB)\n' "$size" $((size / 1000000))
podman images --filter "reference=$IMAGE"

# --- run --------------------------------------------------------------------------------------------
# As Docker does, the container's host name resolves (torchrun --standalone rendezvouses on it); the
# network is the host's (chroot isolation), so the name maps to the loopback address.
container=$(buildah from --pull=never --add-host hvd-compare-test:127.0.0.1 "$IMAGE")
run() { buildah run --isolation chroot --hostname hvd-compare-test "$@"; }

step "the image: non-root user, no compilers, Horovod's build"
uid=$(run "$container" -- id -u)
[ "$uid" != 0 ] || fail "the image runs as root"
echo "runs as uid $uid ($(run "$container" -- id -un))"
# (Open MPI's mpicc wrapper comes with openmpi-bin; without a compiler and headers it compiles nothing.)
compilers=$(run "$container" -- sh -c 'for c in cc gcc g++ c++ cmake make; do command -v $c; done
    ls /usr/include/mpi.h /usr/include/python3*/Python.h /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h 2>/dev/null
    true')
[ -z "$compilers" ] || fail "the runtime image carries build tools or headers: $compilers"
echo "no compilers and no headers in the runtime image"
run "$container" -- horovodrun --check-build

RESULTS=${RESULTS:-$(mktemp -d /tmp/hvd-compare-docker-test.XXXXXX)}
mkdir -p "$RESULTS"
chown "$uid" "$RESULTS"
step "python -m compare run $COMPARE_ARGS --out /results  (through the entry point; /results = $RESULTS)"
read -r -a compare_args <<< "$COMPARE_ARGS"
status=0
# As `docker run -v "$RESULTS:/results" IMAGE <options>` would: tini, then the entry point, which turns
# options alone into `python -m compare run --out /results <options>`.
run -v "$RESULTS:/results" "$container" -- /usr/bin/tini -s -- /usr/local/bin/hvd-entrypoint \
    "${compare_args[@]}" 2>&1 | tee "$RESULTS/compare.log" || status=$?
[ "$status" -eq 0 ] || fail "the comparison exited $status (log: $RESULTS/compare.log)"

# --- checks -----------------------------------------------------------------------------------------
step "checking the report"
for file in report.md report.json; do
    [ -s "$RESULTS/$file" ] || fail "$RESULTS/$file was not written"
    echo "$RESULTS/$file written by uid $(stat -c %u "$RESULTS/$file")"
done
parity=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["analysis"]["verdict"]["parity"])' \
    "$RESULTS/report.json")
[ "$parity" = holds ] || fail "report.json: analysis.verdict.parity is '$parity', not 'holds'"
echo "report.json: analysis.verdict.parity = $parity"
echo
echo "docker-test: OK (build ${build_s} s, image $((size / 1000000)) MB, results in $RESULTS)"
