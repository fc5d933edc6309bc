#!/usr/bin/env bash
# Set up everything the project needs on a new Debian/Ubuntu machine (docs/setup.md):
#   from Debian packages: Open MPI, an OpenSSH client and server (left stopped), Slurm, munge and PMIx (the
#   tests' private clusters); a virtual environment in .venv with torch==$TORCH_VERSION, Horovod 0.28.1 built
#   from its source archive against that torch with the project's patches (cached), and the project, installed
#   under a constraint that keeps that torch. The first time about 15 minutes on 2 cores, 10 of them building
#   Horovod; re-running it is cheap: the Horovod wheel is cached, keyed by torch version and Python ABI.
#
# Variables:
#   TORCH_VERSION   torch to pin (default 2.13.0, the tested one; pyproject.toml accepts a range, and the
#                   project is installed under the constraint torch==$TORCH_VERSION)
#   TORCH_INDEX     extra pip index for torch (e.g. https://download.pytorch.org/whl/cpu); empty = pip's config
#   HOROVOD_VERSION Horovod source release to build (default 0.28.1)
#   HVD_CACHE       wheel cache (default ~/.cache/hvd-compare/wheels)
#   VENV            virtual environment path (default .venv)
#   PYTHON          interpreter used to create it (default python3)
#   HOROVOD_GPU_OPERATIONS=NCCL  build Horovod with NCCL on a CUDA machine
#   EXTRAS          optional extras of the project, comma-separated: ray (Ray Train), spark (pyspark; needs
#                   Java 17 or 21), for `compare migrate` of Horovod jobs run through Ray or Spark
#
#   scripts/setup.sh --if-stale   do nothing when the stamp ($VENV/.setup-stamp) matches: the same torch and
#                                 Horovod versions, patch level and set-up files (make compare/test use this)
set -euo pipefail

TORCH_VERSION=${TORCH_VERSION:-2.13.0}
HOROVOD_VERSION=${HOROVOD_VERSION:-0.28.1}
HVD_CACHE=${HVD_CACHE:-$HOME/.cache/hvd-compare/wheels}
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
EXTRAS=${EXTRAS:-}
case ",$EXTRAS," in *[!a-z,]*) echo "EXTRAS must be a comma-separated list of ray, spark; got '$EXTRAS'" >&2; exit 2;; esac
for extra in ${EXTRAS//,/ }; do
    case $extra in ray|spark) ;; *) echo "EXTRAS: unknown extra '$extra' (ray, spark)" >&2; exit 2;; esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# What the set-up depends on: versions, the patch level and the files that drive it.
stamp_key="torch=$TORCH_VERSION horovod=$HOROVOD_VERSION extras=$EXTRAS patches=$(bash scripts/patch-horovod.sh --level) \
files=$(cat scripts/setup.sh scripts/patch-horovod.sh pyproject.toml | sha256sum | cut -c1-16)"
if [ "${1:-}" = --if-stale ]; then
    if [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/.setup-stamp" 2>/dev/null)" = "$stamp_key" ]; then
        exit 0
    fi
    echo "set-up missing or stale: running scripts/setup.sh (the first time about 15 minutes on 2 cores, 10 of them building Horovod)"
fi

step() { printf '\n==> %s\n' "$*"; }

# OpenSSH: the multi-host tests (tests/test_multihost.py) start their own sshd in each network namespace,
# which horovodrun -H reaches over ssh.
had_sshd=yes; [ -x /usr/sbin/sshd ] || had_sshd=no
# Slurm and munge: the Slurm tests (tests/test_slurm.py) start a private cluster of their own; PMIx lets
# srun start Open MPI ranks directly.
if ! command -v mpirun >/dev/null 2>&1 || ! command -v mpicc >/dev/null 2>&1 \
        || ! command -v ssh >/dev/null 2>&1 || [ "$had_sshd" = no ] \
        || ! command -v slurmctld >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
    step "installing Open MPI, OpenSSH, Slurm and munge from Debian packages"
    sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd=sudo
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends \
        openmpi-bin libopenmpi-dev openssh-server openssh-client \
        slurm-wlm slurm-wlm-basic-plugins munge libpmix-dev >/dev/null
    if [ "$had_sshd" = no ]; then
        # The package starts a system-wide sshd where it can; the tests need none, so leave none running.
        $sudo_cmd systemctl disable --now ssh >/dev/null 2>&1 || $sudo_cmd service ssh stop >/dev/null 2>&1 || true
    fi
fi
mpirun --version | head -n 1

if [ ! -x "$VENV/bin/python" ]; then
    step "creating virtual environment $VENV"
    "$PYTHON" -m venv "$VENV"
fi
py="$VENV/bin/python"
pip=("$py" -m pip install -q --disable-pip-version-check)

step "installing torch==$TORCH_VERSION"
torch_args=("torch==$TORCH_VERSION")
[ -n "${TORCH_INDEX:-}" ] && torch_args+=(--extra-index-url "$TORCH_INDEX")
"${pip[@]}" "${torch_args[@]}"
# What Horovod's setup.py imports; it builds without isolation so that it sees this torch.
"${pip[@]}" setuptools wheel packaging psutil cloudpickle pyyaml cffi

abi=$("$py" -c 'import sys; print(f"cp{sys.version_info.major}{sys.version_info.minor}")')
torch_full=$("$py" -c 'import torch; print(torch.__version__.replace("+", "_"))')
gpu_ops=${HOROVOD_GPU_OPERATIONS:-none}
# The patch level names the set of source patches (scripts/patch-horovod.sh): a wheel built with other
# patches is never taken from the cache.
PATCH_LEVEL=$(bash scripts/patch-horovod.sh --level)
cache_dir="$HVD_CACHE/horovod-$HOROVOD_VERSION-$PATCH_LEVEL-torch-$torch_full-$abi-gpu-$gpu_ops"
wheel=$(ls "$cache_dir"/horovod-*.whl 2>/dev/null | head -n 1 || true)

if [ -z "$wheel" ]; then
    step "building Horovod $HOROVOD_VERSION against torch $torch_full ($abi); about 10 minutes on 2 cores"
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    "$py" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
        "horovod==$HOROVOD_VERSION" -d "$work"
    tar -xzf "$work"/horovod-"$HOROVOD_VERSION".tar.gz -C "$work"
    src="$work/horovod-$HOROVOD_VERSION"
    bash scripts/patch-horovod.sh "$src"
    export HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 \
        HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1
    [ "$gpu_ops" != none ] && export HOROVOD_GPU_OPERATIONS="$gpu_ops"
    export MAKEFLAGS="-j$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)"  # GNU nproc obeys OMP_NUM_THREADS
    "$py" -m pip wheel --disable-pip-version-check --no-build-isolation --no-deps \
        -w "$work/dist" "$src" > "$work/build.log" 2>&1 || { tail -n 40 "$work/build.log"; exit 1; }
    mkdir -p "$cache_dir.tmp"
    cp "$work"/dist/horovod-*.whl "$cache_dir.tmp/"
    rm -rf "$cache_dir"; mv "$cache_dir.tmp" "$cache_dir"   # atomic: a cache entry is whole or absent
    wheel=$(ls "$cache_dir"/horovod-*.whl | head -n 1)
else
    step "using cached Horovod wheel $wheel"
fi
"${pip[@]}" --no-deps --force-reinstall "$wheel"
"${pip[@]}" cloudpickle psutil pyyaml packaging cffi

step "installing the project (editable, with test tools${EXTRAS:+ and $EXTRAS})"
# mpi4py is compiled against the system Open MPI so that it and Horovod share one MPI library. The constraint
# keeps the torch Horovod was just built for: nothing the project or its extras require may move it.
constraint="$VENV/torch-constraint.txt"
echo "torch==$TORCH_VERSION" > "$constraint"
"${pip[@]}" --no-binary mpi4py -c "$constraint" -e ".[dev${EXTRAS:+,$EXTRAS}]"
torch_now=$("$py" -c 'import torch; print(torch.__version__.replace("+", "_"))')
if [ "$torch_now" != "$torch_full" ]; then
    echo "setup: torch $torch_now is installed, but Horovod was built for torch $torch_full" >&2
    exit 1
fi
if [[ ",$EXTRAS," == *,spark,* ]] && ! java -version >/dev/null 2>&1; then
    step "installing Java 17 for pyspark"
    sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd=sudo
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless >/dev/null
fi

step "checking the Horovod build"
"$VENV/bin/horovodrun" --check-build
echo "$stamp_key" > "$VENV/.setup-stamp"
echo
echo "setup done: activate with 'source $VENV/bin/activate'"
