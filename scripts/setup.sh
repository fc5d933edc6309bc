#!/usr/bin/env bash
# Set up everything the project needs on a Debian or Ubuntu machine (docs/setup.md):
#   from Debian packages: Open MPI and an OpenSSH client and server (the multi-host tests start sshd of their
#   own); with EXTRAS=slurm also Slurm, munge and PMIx (the Slurm tests' private cluster). No service these
#   packages bring is enabled at boot or left running. Then a virtual environment in .venv with
#   torch==$TORCH_VERSION, Horovod 0.28.1 built from its source archive against that torch with the project's
#   patches (cached), and the project with its `compare` and `dev` extras, under a constraint that keeps that
#   torch. Measured times: docs/setup.md.
#
# Prerequisites, all checked before anything is installed (the first one missing stops it in one line):
#   apt-get, and root or sudo, when a Debian package is missing; Python >= 3.11 with venv and its headers
#   (python3-venv, python3-dev); cmake, g++ and make.
#
# Variables. A choice sticks: a variable left unset takes the value the last set-up recorded in its stamp
# ($VENV/.setup-stamp), else its default; set it (even to nothing, EXTRAS=) to change it.
#   TORCH_VERSION   torch to pin (default 2.13.0, the tested one; the project is installed under the
#                   constraint torch==$TORCH_VERSION)
#   HOROVOD_VERSION Horovod source release to build (default 0.28.1)
#   HOROVOD_GPU_OPERATIONS=NCCL  build Horovod with NCCL on a CUDA machine (default: none)
#   EXTRAS          comma-separated: slurm (Debian's Slurm, munge and PMIx, for the Slurm tests, which skip
#                   without them), ray (Ray Train), spark (pyspark and Java 17), for `compare migrate` of
#                   Horovod jobs run through Ray or Spark
# Not recorded: TORCH_INDEX (an extra pip index for torch), HVD_CACHE (the wheel cache, default
# ~/.cache/hvd-compare/wheels), VENV (default .venv), PYTHON (the interpreter that makes it, default python3).
#
#   scripts/setup.sh              set up with the choices above
#   scripts/setup.sh --if-stale   do nothing when the stamp matches these choices, the patch level and the set-up
#                                 files (make compare/test use this)
#   scripts/setup.sh --check      check the prerequisites and say what a set-up would install; install nothing
#   scripts/setup.sh --stamp      print the stamp a set-up with these choices writes; install nothing
set -euo pipefail

mode=${1:-}
case $mode in
    "" | --if-stale | --check | --stamp) ;;
    *) echo "usage: scripts/setup.sh [--if-stale | --check | --stamp]" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
HVD_CACHE=${HVD_CACHE:-$HOME/.cache/hvd-compare/wheels}
stamp_file="$VENV/.setup-stamp"
# The choices of a set-up that started, written before it installs anything: one that failed half-way (a
# Horovod build that does not compile against the torch chosen) leaves them, so that the next `make` tries
# the same choice again, and fails the same way, rather than set up the defaults in its place.
choices_file="$VENV/.setup-choices"

# The choices: the variable when set (empty: the default), else what the last set-up that started chose (the
# same as its stamp when it succeeded; a virtual environment older than the choices file: its stamp), else the
# default. Both files have one key=value a line (an older stamp, all on one line, reads the same).
recorded() {
    local file
    for file in "$choices_file" "$stamp_file"; do
        [ -f "$file" ] && { tr ' ' '\n' < "$file" | grep "^$1=" | head -n 1; return; }
    done
    return 1
}
choose() {  # VARIABLE KEY DEFAULT
    local line
    if [[ -v $1 ]]; then
        [ -n "${!1}" ] || printf -v "$1" '%s' "$3"
    elif line=$(recorded "$2"); then
        printf -v "$1" '%s' "${line#*=}"
    else
        printf -v "$1" '%s' "$3"
    fi
}
choose TORCH_VERSION torch 2.13.0
choose HOROVOD_VERSION horovod 0.28.1
choose HOROVOD_GPU_OPERATIONS gpu ""
choose EXTRAS extras ""
case ",$EXTRAS," in
    *[!a-z,]*) echo "setup: EXTRAS must be a comma-separated list of slurm, ray, spark; got '$EXTRAS'" >&2; exit 2 ;;
esac
for extra in ${EXTRAS//,/ }; do
    case $extra in slurm | ray | spark) ;; *) echo "setup: EXTRAS: unknown extra '$extra' (slurm, ray, spark)" >&2; exit 2 ;; esac
done
with_extra() { [[ ",$EXTRAS," == *,$1,* ]]; }
gpu_ops=${HOROVOD_GPU_OPERATIONS:-none}

stamp() {  # what this set-up depends on: the choices, the patch level and the files that drive it
    printf '%s\n' "torch=$TORCH_VERSION" "horovod=$HOROVOD_VERSION" "gpu=${HOROVOD_GPU_OPERATIONS:-}" "extras=$EXTRAS" \
        "patches=$(bash scripts/patch-horovod.sh --level)" \
        "files=$(cat scripts/setup.sh scripts/patch-horovod.sh pyproject.toml | sha256sum | cut -c1-16)"
}
if [ "$mode" = --stamp ]; then
    stamp
    exit 0
fi
if [ "$mode" = --if-stale ]; then
    if [ -x "$VENV/bin/python" ] && [ "$(cat "$stamp_file" 2>/dev/null)" = "$(stamp)" ]; then
        exit 0
    fi
    echo "set-up missing or stale: running scripts/setup.sh with torch $TORCH_VERSION${EXTRAS:+, extras $EXTRAS} (6 to 9 minutes the first time on 2 cores; docs/setup.md)"
fi

# --- Prerequisites --------------------------------------------------------------------------------------
found() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ]; }
# Debian packages, each with a command that shows it is there. The tests' daemons (sshd, and with the slurm
# extra munged, slurmctld, slurmd) are started by the tests themselves, privately.
packages=()
{ found mpirun && found mpicc; } || packages+=(openmpi-bin libopenmpi-dev)
{ found ssh && found sshd; } || packages+=(openssh-server openssh-client)
if with_extra slurm; then
    { found slurmctld && found slurmd && found srun && found munged; } \
        || packages+=(slurm-wlm slurm-wlm-basic-plugins munge libpmix-dev)
fi
if with_extra spark && ! found java; then
    packages+=(openjdk-17-jre-headless)
fi
sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd=sudo

missing_prerequisite() {  # prints the first prerequisite that is missing, in a few words; nothing when all are met
    if [ ${#packages[@]} -gt 0 ]; then
        found apt-get || { echo "apt-get not found: the set-up installs Debian packages (${packages[*]}); on another distribution install their equivalents first"; return; }
        [ -z "$sudo_cmd" ] || found sudo || { echo "sudo not found: installing ${packages[*]} needs root; run as root or install sudo"; return; }
    fi
    local py=$PYTHON version choose_another="PYTHON=/path/to/python3.11 or newer"
    if [ -x "$VENV/bin/python" ]; then py="$VENV/bin/python"; choose_another="remove $VENV and give $choose_another"; fi
    found "$py" || { echo "Python not found: $py ($choose_another)"; return; }
    version=$("$py" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null) || true
    if ! [[ $version =~ ^([0-9]+)\.([0-9]+)\. ]] \
            || (( BASH_REMATCH[1] < 3 || (BASH_REMATCH[1] == 3 && BASH_REMATCH[2] < 11) )); then
        echo "Python 3.11 or newer is needed; $py is ${version:-one that prints no version} ($choose_another)"
        return
    fi
    if [ ! -x "$VENV/bin/python" ] && ! "$py" -c 'import ensurepip, venv' >/dev/null 2>&1; then
        echo "Python's venv module not found for $py (Debian: apt-get install python3-venv)"; return
    fi
    "$py" -c 'import os, sysconfig; raise SystemExit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
        || { echo "Python's headers (Python.h) not found for $py (Debian: apt-get install python3-dev)"; return; }
    for tool in cmake g++ make; do
        found "$tool" || { echo "$tool not found: Horovod is built from source (Debian: apt-get install $tool)"; return; }
    done
}
if missing=$(missing_prerequisite) && [ -n "$missing" ]; then
    echo "setup: $missing" >&2
    exit 1
fi
if [ "$mode" = --check ]; then
    echo "setup: prerequisites met; would install ${packages[*]:-no Debian package}, then torch $TORCH_VERSION, Horovod $HOROVOD_VERSION and the project in $VENV${EXTRAS:+ (extras $EXTRAS)}"
    exit 0
fi

# Each step's time, said at the end: where a set-up's minutes went (docs/setup.md, "How long").
set_up_started=$SECONDS
step_names=() step_started=()
step() { printf '\n==> %s\n' "$*"; step_names+=("$*"); step_started+=("$SECONDS"); }
step_times() {
    local i end
    echo "set-up steps, in seconds:"
    for i in "${!step_names[@]}"; do
        end=${step_started[$((i + 1))]:-$SECONDS}
        printf '%6d  %s\n' $((end - step_started[i])) "${step_names[i]}"
    done
    printf '%6d  all\n' $((SECONDS - set_up_started))
}

# --- Debian packages, no service at boot ----------------------------------------------------------------
# Debian's packages of daemons (openssh-server, munge, slurmd, slurmctld) enable their service at boot and
# start it as they install; the tests start private daemons of their own and need none of these. While apt
# runs, a policy-rc.d refuses every start (unless the machine has a policy of its own, which then decides);
# afterwards each unit the install enabled is disabled again, and stopped; units enabled before stay as they were.
enabled_units() {  # every unit enabled at boot: systemd's .wants links and SysV's start links, one a line
    {
        find /etc/systemd/system -path '*.wants/*' -type l -printf '%f\n' 2>/dev/null || true
        find /etc/rc2.d /etc/rc3.d /etc/rc4.d /etc/rc5.d -name 'S[0-9][0-9]*' -printf '%f\n' 2>/dev/null | cut -c4- || true
    } | sed 's/\.service$//' | sort -u
}
leave_disabled() {  # UNIT: not started at boot, not running
    if found systemctl; then
        $sudo_cmd systemctl disable --quiet "$1" >/dev/null 2>&1 || true  # its SysV start links too
    else
        $sudo_cmd deb-systemd-helper disable "$1.service" >/dev/null 2>&1 || true
        $sudo_cmd update-rc.d "$1" disable >/dev/null 2>&1 || true
    fi
    if [ -d /run/systemd/system ]; then
        $sudo_cmd systemctl stop "$1" >/dev/null 2>&1 || true
    elif [ -x "/etc/init.d/$1" ]; then
        $sudo_cmd "/etc/init.d/$1" stop >/dev/null 2>&1 || true
    fi
}
apt_install() {  # PACKAGE...
    local before policy=/usr/sbin/policy-rc.d made_policy=no unit added
    before=$(enabled_units)
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\n# scripts/setup.sh: no service starts while it installs packages\nexit 101\n' \
            | $sudo_cmd tee "$policy" >/dev/null
        $sudo_cmd chmod 755 "$policy"
        made_policy=yes
        trap '$sudo_cmd rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "$@" >/dev/null
    if [ "$made_policy" = yes ]; then
        $sudo_cmd rm -f "$policy"
        trap - EXIT
    fi
    added=$(comm -13 <(echo "$before") <(enabled_units))
    for unit in $added; do
        leave_disabled "$unit"
    done
    [ -z "$added" ] || echo "left disabled at boot and stopped, as before the install: $(echo $added)"
}

if [ ${#packages[@]} -gt 0 ]; then
    step "installing ${packages[*]} from Debian packages (no service enabled or started)"
    apt_install "${packages[@]}"
fi
mpirun --version | head -n 1

# --- The virtual environment ----------------------------------------------------------------------------
mkdir -p "$VENV"
stamp | sed -n '1,4p' > "$choices_file.tmp" && mv "$choices_file.tmp" "$choices_file"  # torch, horovod, gpu, extras
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
# A CUDA build of torch (what pip's default index gives for some versions, 2.12.0 among them) makes Horovod's
# build compile CUDA code whatever HOROVOD_GPU_OPERATIONS says; on a machine set up for CPU that stops minutes
# in (CMake: "Could NOT find CUDAToolkit", then the CUDA runtime for torch's target). Said now, in one line.
torch_cuda=$("$py" -c 'import torch; print(torch.version.cuda or "")' 2>/dev/null || true)
if [ -n "$torch_cuda" ] && [ "$gpu_ops" = none ]; then
    echo "setup: torch $TORCH_VERSION is a CUDA $torch_cuda build, against which Horovod builds only as a CUDA" \
        "build: give TORCH_INDEX (PyTorch's index of CPU wheels) for a CPU torch, or, on a CUDA machine," \
        "HOROVOD_GPU_OPERATIONS=NCCL" >&2
    exit 1
fi

abi=$("$py" -c 'import sys; print(f"cp{sys.version_info.major}{sys.version_info.minor}")')
torch_full=$("$py" -c 'import torch; print(torch.__version__.replace("+", "_"))')
# The patch level names the set of source patches (scripts/patch-horovod.sh): a wheel built with other
# patches is never taken from the cache.
PATCH_LEVEL=$(bash scripts/patch-horovod.sh --level)
cache_dir="$HVD_CACHE/horovod-$HOROVOD_VERSION-$PATCH_LEVEL-torch-$torch_full-$abi-gpu-$gpu_ops"
wheel=$(ls "$cache_dir"/horovod-*.whl 2>/dev/null | head -n 1 || true)

if [ -z "$wheel" ]; then
    step "building Horovod $HOROVOD_VERSION against torch $torch_full ($abi); about 3 minutes on 2 cores"
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    "$py" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
        "horovod==$HOROVOD_VERSION" -d "$work"
    tar -xzf "$work"/horovod-"$HOROVOD_VERSION".tar.gz -C "$work"
    src="$work/horovod-$HOROVOD_VERSION"
    bash scripts/patch-horovod.sh "$src"
    export HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 \
        HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1
    # The build alone sees the GPU operations (none: unset, which Horovod reads as none); the shell keeps the
    # choice for the stamp written at the end (unsetting it here once failed every first set-up there, set -u).
    gpu_env=(env -u HOROVOD_GPU_OPERATIONS)
    [ "$gpu_ops" = none ] || gpu_env=(env HOROVOD_GPU_OPERATIONS="$gpu_ops")
    export MAKEFLAGS="-j$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)"  # GNU nproc obeys OMP_NUM_THREADS
    "${gpu_env[@]}" "$py" -m pip wheel --disable-pip-version-check --no-build-isolation --no-deps \
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

# The project's own extras: compare (the comparison's dependencies; without it `pip install` gives the
# migration alone), dev (the test tools), and ray and spark when chosen (slurm is Debian packages only).
pip_extras=compare,dev
with_extra ray && pip_extras+=,ray
with_extra spark && pip_extras+=,spark
step "installing the project (editable, extras $pip_extras)"
# mpi4py is compiled against the system Open MPI so that it and Horovod share one MPI library. The constraint
# keeps the torch Horovod was just built for: nothing the project or its extras require may move it.
constraint="$VENV/torch-constraint.txt"
echo "torch==$TORCH_VERSION" > "$constraint"
"${pip[@]}" --no-binary mpi4py -c "$constraint" -e ".[$pip_extras]"
torch_now=$("$py" -c 'import torch; print(torch.__version__.replace("+", "_"))')
if [ "$torch_now" != "$torch_full" ]; then
    echo "setup: torch $torch_now is installed, but Horovod was built for torch $torch_full" >&2
    exit 1
fi

step "checking the Horovod build"
"$VENV/bin/horovodrun" --check-build
stamp > "$stamp_file.tmp"
mv "$stamp_file.tmp" "$stamp_file"
echo
step_times
echo "setup done: activate with 'source $VENV/bin/activate'"
