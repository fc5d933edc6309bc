#!/usr/bin/env bash
# Every CUDA/NCCL path of the project, checked in one run on a GPU machine (docs/features.md, "GPU (CUDA/NCCL)").
#
#   bash scripts/gpu-check.sh [OUT_DIR]     # OUT_DIR: default $OUT, else results/gpu-check
#
# It:
#   1. records nvidia-smi and the Python, torch, CUDA, cuDNN, NCCL, nvcc, CMake and compiler versions;
#   2. builds Horovod 0.28.1 from the source archive in .gpu/ (scripts/patch-horovod.sh; Gloo controller, NCCL GPU
#      operations, no MPI, CUDA kernels for sm_90 only) against the machine's own torch, and installs it;
#      meanwhile the DDP and reference runs go on, since they do not need it;
#   3. runs both implementations with --device cuda at np 1 (one GPU: one rank per framework, over NCCL), as
#      horovodrun -np 1 --gloo and torchrun --standalone --nproc-per-node 1, in four configurations: plain, --amp
#      (float16 autocast with a GradScaler), --sync-bn on the resnet workload, --compression fp16; and the
#      single-process reference (python -m workload.reference) of each;
#   4. `python -m compare check` on each Horovod/DDP pair and each DDP/reference pair, and on a pair that must
#      differ (plain against --amp), which must fail; the resnet is not reproducible run to run on the GPU, so its
#      SyncBatchNorm pairs are judged against the band of a repeated DDP run (--calibration);
#   5. when time is left, times both frameworks side by side once the build no longer loads the machine;
#   6. writes OUT_DIR/summary.json (per run: status, step times, final loss; per pair: the largest relative loss
#      difference) and tars the run records and launch logs into OUT_DIR/gpu-runs.tar.gz.
# Each step writes one PASS, FAIL or SKIP line to OUT_DIR/gpu-check.log; a failing step does not stop the others
# (only the Horovod runs need the build). The Horovod build log is OUT_DIR/horovod-build.log, and the wheel comes
# back in pieces under 16 MiB (OUT_DIR/horovod-*.whl.part-NN: `cat` them into .gpu/prebuilt/ for a later run).
# Exit status: 0 when no step failed, else 1.
#
# Variables:
#   PY                  the interpreter (default python3; on the GPU machine, the one that holds the CUDA torch)
#   GPU_CHECK_DEVICE    cuda (default), or cpu to try this script's logic on a machine without a GPU (the
#                       --sync-bn configuration then runs without --sync-bn, which needs CUDA)
#   GPU_CHECK_BUILD     1 (default): build Horovod, unless .gpu/prebuilt/ holds a wheel that this script built on an
#                       earlier run against the same torch (with that version in .gpu/prebuilt/torch-version): then
#                       install that; 0: use the Horovod already installed; prep: unpack, patch and set up the
#                       build, but compile nothing (then no Horovod runs)
#   GPU_CHECK_BUDGET_S  wall-clock budget in seconds (default 360); a run that no longer fits is skipped (SKIP)
#   GPU_CHECK_STEPS     optimizer steps of each parity run (default 40; parity reads the first 20)
#   GPU_CHECK_WORK      scratch directory (default /tmp/gpu-check; emptied first)
#   GPU_CHECK_RUNS      1 (default): the runs, checks and timing above; 0: none of them (with GPU_CHECK_PYTEST=1)
#   GPU_CHECK_PYTEST    1: also run tests/test_cuda.py with pytest at the end, in what is left of the budget
set -uo pipefail   # no -e: a failing step is logged and the next one runs

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
out=${1:-${OUT:-results/gpu-check}}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2
work=${GPU_CHECK_WORK:-/tmp/gpu-check}
rm -rf "$work" && mkdir -p "$work/runs" "$work/logs" || exit 2
log="$out/gpu-check.log"
: > "$log"

PY=${PY:-python3}
device=${GPU_CHECK_DEVICE:-cuda}
build=${GPU_CHECK_BUILD:-1}
budget=${GPU_CHECK_BUDGET_S:-360}
steps=${GPU_CHECK_STEPS:-40}
project_runs=${GPU_CHECK_RUNS:-1}
pytest_too=${GPU_CHECK_PYTEST:-0}
case "$device" in cuda|cpu) ;; *) echo "gpu-check.sh: GPU_CHECK_DEVICE must be cuda or cpu" >&2; exit 2;; esac
case "$build" in 0|1|prep) ;; *) echo "gpu-check.sh: GPU_CHECK_BUILD must be 0, 1 or prep" >&2; exit 2;; esac

pybin=$("$PY" -c 'import os, sys; print(os.path.dirname(sys.executable))') || exit 2
# Counted before OMP_NUM_THREADS=1 below: GNU nproc honours that variable (the first GPU run built with -j1).
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
# The interpreter's own launchers (torchrun, horovodrun once installed), cmake and ninja come first.
export PATH="$pybin:$PATH"
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1

# One line (or block) per event, to the log and the screen; the background runs write here too, in one write each.
note() {
    local text
    text="$(date -u +%H:%M:%S) $*"
    printf '%s\n' "$text" >> "$log"
    printf '%s\n' "$text"
}

# step NAME LIMIT CMD...: run CMD (LIMIT seconds at most, less if the budget has less) with its output in
# $work/logs/NAME.log; one PASS/FAIL/SKIP line, with the log's last lines on failure. Returns CMD's status.
step() {
    local name=$1 limit=$2
    shift 2
    local remaining=$((budget - SECONDS - 10))
    if ((remaining < 15)); then
        note "SKIP $name: the ${budget} s budget is spent"
        return 125
    fi
    ((limit > remaining)) && limit=$remaining
    local started=$SECONDS rc
    timeout -k 5 "$limit" "$@" > "$work/logs/$name.log" 2>&1
    rc=$?
    if ((rc == 0)); then
        note "PASS $name ($((SECONDS - started)) s)"
    else
        local why="exit $rc"
        ((rc == 124)) && why="timed out after $limit s"
        note "FAIL $name ($why, $((SECONDS - started)) s); its last lines:
$(tail -n 25 "$work/logs/$name.log" | sed 's/^/    /')"
    fi
    return $rc
}

# fn_step NAME FUNCTION: a shell function run in this shell (its exports stay), output to $work/logs/NAME.log.
fn_step() {
    local name=$1 fn=$2 started=$SECONDS rc
    "$fn" > "$work/logs/$name.log" 2>&1
    rc=$?
    if ((rc == 0)); then
        note "PASS $name ($((SECONDS - started)) s)"
    else
        note "FAIL $name (exit $rc); its last lines:
$(tail -n 25 "$work/logs/$name.log" | sed 's/^/    /')"
    fi
    return $rc
}

# pip_install WHEEL...: into the interpreter's environment; where that is read-only, into $work/site instead.
pip_install() {
    "$PY" -m pip install -q --no-index --no-deps --force-reinstall "$@" && return 0
    echo "the interpreter's environment refused the install: installing into $work/site"
    "$PY" -m pip install -q --no-index --no-deps --target "$work/site" "$@" || return 1
    export PYTHONPATH="$work/site:$PYTHONPATH" PATH="$work/site/bin:$PATH"
}

# --- 1. versions -----------------------------------------------------------------------------------------
versions() {
    if [ "$device" = cuda ]; then
        nvidia-smi || return 1
        nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv || return 1
    fi
    "$PY" - <<'EOF' || return 1
import platform, sys
import torch
import torch.distributed as dist
print("python", platform.python_version(), sys.executable)
print("torch", torch.__version__, "| cuda", torch.version.cuda, "| cudnn", torch.backends.cudnn.version())
if torch.cuda.is_available():
    print("nccl", ".".join(map(str, torch.cuda.nccl.version())))
    print("gpu", torch.cuda.get_device_name(0), "| capability", torch.cuda.get_device_capability(0),
          "| memory GiB", round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1))
print("torch.distributed.all_gather_single", hasattr(dist, "all_gather_single"))
EOF
    command -v nvcc >/dev/null && nvcc --version | tail -n 2
    cmake --version | head -n 1
    c++ --version | head -n 1
    echo "make: $(command -v make || echo none); ninja: $(command -v ninja || echo none)"
    echo "mpicc: $(command -v mpicc || echo none); mpirun: $(command -v mpirun || echo none)"
    echo "cores: $cores; kernel: $(uname -r)"
}
fn_step versions versions
sed 's/^/    /' "$work/logs/versions.log" >> "$log"

# --- 2. the runs that need no Horovod build: DDP and the reference (in the background) -----------------------
common=(--device "$device" --log-every 10 --seed 0)
declare -A config=(
    [plain]="--workload mlp --steps $steps"
    [amp]="--workload mlp --steps $steps --amp"
    [syncbn]="--workload resnet --steps $steps --batch-size 32 --sync-bn"
    [fp16]="--workload mlp --steps $steps --compression fp16"
)
[ "$device" = cpu ] && config[syncbn]="--workload resnet --steps $steps --batch-size 32"   # SyncBatchNorm needs CUDA
names=(plain amp syncbn fp16)

ddp_run() {   # ddp_run NAME ARGS...
    local name=$1
    shift
    step "ddp-$name" 150 torchrun --standalone --nproc-per-node 1 -m native_impl "${common[@]}" "$@" \
        --out "$work/runs/ddp-$name"
}
hvd_run() {
    local name=$1
    shift
    step "hvd-$name" 150 horovodrun -np 1 --gloo "$PY" -m hvd_impl "${common[@]}" "$@" --out "$work/runs/hvd-$name"
}
ref_run() {
    local name=$1
    shift
    step "ref-$name" 120 "$PY" -m workload.reference --emulate-world-size 1 "${common[@]}" "$@" \
        --out "$work/runs/ref-$name"
}

[ "$project_runs" = 1 ] && (
    for name in "${names[@]}"; do
        # shellcheck disable=SC2086  # the configuration strings are word lists
        ddp_run "$name" ${config[$name]}
        # shellcheck disable=SC2086
        ref_run "$name" ${config[$name]}
    done
    # The resnet is not reproducible run to run on the GPU (cuDNN): a second DDP run measures by how much.
    # shellcheck disable=SC2086
    ddp_run syncbn-again ${config[syncbn]}
) &
no_build_runs=$!

# --- 3. Horovod, built against this machine's torch ----------------------------------------------------------
archive=$(ls "$root"/.gpu/horovod-0.28.1.tar.gz 2>/dev/null)
src="$work/horovod-0.28.1"

prepare_build() {
    [ -n "$archive" ] || { echo "no .gpu/horovod-0.28.1.tar.gz: carry .gpu (see docs/features.md)"; return 1; }
    # What Horovod's setup.py imports or requires; cffi and pycparser travel as wheels in .gpu/wheels.
    if ! "$PY" -c 'import cffi' 2>/dev/null; then
        pip_install "$root"/.gpu/wheels/*.whl || return 1
    fi
    "$PY" -c 'import setuptools, wheel, packaging, psutil, cloudpickle, yaml, cffi; print("setup.py imports: ok")' \
        || return 1
    tar -xzf "$archive" -C "$work" || return 1
    bash scripts/patch-horovod.sh "$src" || return 1
    echo "patched with scripts/patch-horovod.sh, level $(bash scripts/patch-horovod.sh --level)"
    # Python 3.12 has no distutils of its own; horovod/torch/CMakeLists.txt asks it for Python's include directory.
    if ! "$PY" -c 'from distutils.sysconfig import get_python_inc' 2>/dev/null; then
        sed -i 's/from distutils.sysconfig import get_python_inc; print(get_python_inc())/import sysconfig; print(sysconfig.get_paths()[\\"include\\"])/' \
            "$src/horovod/torch/CMakeLists.txt"
        grep -q 'import sysconfig' "$src/horovod/torch/CMakeLists.txt" || return 1
        echo "build patch: Python's include directory from sysconfig (no distutils)"
    fi
    [ "$device" = cuda ] || { echo "device cpu: no CUDA set-up"; return 0; }

    # CUDA: torch finds the toolkit through CUDA_HOME, Horovod through HOROVOD_CUDA_HOME.
    local nvcc
    nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null) || { echo "no nvcc"; return 1; }
    export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(readlink -f "$nvcc")")")}
    export PATH="$CUDA_HOME/bin:$PATH"
    echo "CUDA_HOME=$CUDA_HOME"
    # Horovod compiles cuda_kernels.cu as C++11: make sure this nvcc still takes that, else build it as C++17.
    if ! nvcc -std=c++11 -O3 -Xcompiler -fPIC -gencode arch=compute_90,code=sm_90 -c \
            "$src/horovod/common/ops/cuda/cuda_kernels.cu" -o "$work/probe.o" > "$work/logs/nvcc-probe.log" 2>&1; then
        tail -n 20 "$work/logs/nvcc-probe.log"
        sed -i 's/set(CMAKE_CUDA_STANDARD 11)/set(CMAKE_CUDA_STANDARD 17)/' "$src/horovod/common/ops/cuda/CMakeLists.txt"
        echo "build patch: cuda_kernels.cu as C++17 (nvcc refused it as C++11)"
    else
        echo "nvcc compiles cuda_kernels.cu as C++11 for sm_90"
    fi
    # NCCL: the one torch loads, from the nvidia-nccl wheel (include/ and lib/). Its library has only the .so.2
    # name, so the linker gets a directory with a libnccl.so of its own.
    local site header library
    site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    header=$(find "$site/nvidia" /usr/include "$CUDA_HOME/include" -name nccl.h 2>/dev/null | head -n 1)
    library=$(find "$site/nvidia" /usr/lib/x86_64-linux-gnu "$CUDA_HOME/lib64" -name 'libnccl.so*' 2>/dev/null \
        | head -n 1)
    [ -n "$header" ] && [ -n "$library" ] || { echo "NCCL not found (header '$header', library '$library')"; return 1; }
    mkdir -p "$work/nccl/lib"
    ln -sf "$library" "$work/nccl/lib/libnccl.so"
    nccl_include=$(dirname "$header")
    grep -E '^#define NCCL_(MAJOR|MINOR|PATCH) ' "$header"
    echo "NCCL: $header, $library"
    # At run time Horovod's library finds libnccl.so.2 there (torch has usually loaded it already).
    export LD_LIBRARY_PATH="$(dirname "$library")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

# The build's settings, in the subshell that builds only: none of them reaches the runs' environment.
build_env() {
    export HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 \
        HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1
    if [ "$device" = cuda ]; then
        # HOROVOD_BUILD_CUDA_CC_LIST is what cmake/build_utils.py reads for nvcc's -gencode (one architecture:
        # the H200's sm_90); CUDAARCHS sets CMake's own CUDA architectures to the same.
        export HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_BUILD_CUDA_CC_LIST=90 CUDAARCHS=90 HOROVOD_WITHOUT_NVTX=1 \
            HOROVOD_CUDA_HOME="$CUDA_HOME" HOROVOD_NCCL_INCLUDE="$nccl_include" HOROVOD_NCCL_LIB="$work/nccl/lib" \
            HOROVOD_NCCL_LINK=SHARED
    fi
    export MAKEFLAGS="-j$cores"
    # CMake 4 refuses the bundled gloo's cmake_minimum_required(2.8.12) without this.
    export CMAKE_POLICY_VERSION_MINIMUM=3.5
    # gcc >= 13 (gloo: >= 15) no longer includes <cstdint> through other standard headers.
    export CXXFLAGS="${CXXFLAGS:+$CXXFLAGS }-include cstdint"
    command -v make >/dev/null || export CMAKE_GENERATOR=Ninja
    env | grep -E '^(HOROVOD_|CUDA|CMAKE_|MAKEFLAGS|CXXFLAGS|LD_LIBRARY_PATH)' | sort
}

# A wheel built by an earlier run of this script on the same torch (carried back in .gpu/prebuilt/) saves the build.
torch_version=$("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null)
prebuilt=$(ls "$root"/.gpu/prebuilt/horovod-*.whl 2>/dev/null | head -n 1)
if [ "$build" = 1 ] && [ -n "$prebuilt" ] && [ "$(cat "$root/.gpu/prebuilt/torch-version" 2>/dev/null)" = "$torch_version" ]; then
    build=prebuilt
fi
horovod=no
nccl_include=""
case "$build" in
    0)
        note "SKIP horovod-build: GPU_CHECK_BUILD=0 uses the installed Horovod"
        horovod=yes
        ;;
    prep)
        fn_step horovod-prepare prepare_build
        sed 's/^/    /' "$work/logs/horovod-prepare.log" >> "$log"
        (build_env) | sed 's/^/    /' >> "$log"
        note "SKIP horovod-build: GPU_CHECK_BUILD=prep compiles nothing"
        ;;
    prebuilt)
        fn_step horovod-prepare prepare_build
        sed 's/^/    /' "$work/logs/horovod-prepare.log" >> "$log"
        note "SKIP horovod-build: installing $(basename "$prebuilt"), built by an earlier run against torch $torch_version"
        install_horovod() { pip_install "$prebuilt"; }
        fn_step horovod-install install_horovod && horovod=yes
        ;;
    1)
        if fn_step horovod-prepare prepare_build; then
            sed 's/^/    /' "$work/logs/horovod-prepare.log" >> "$log"
            limit=$((budget - SECONDS - 80))   # leave the Horovod runs about 80 s
            ((limit > 300)) && limit=300
            started=$SECONDS
            # -v: the whole compiler output goes to the build log, which comes back with the results.
            if (build_env && exec timeout -k 5 "$limit" "$PY" -m pip wheel -v --no-build-isolation --no-deps \
                    --no-index -w "$work/dist" "$src") > "$out/horovod-build.log" 2>&1; then
                note "PASS horovod-build ($((SECONDS - started)) s; log horovod-build.log)"
                install_horovod() { pip_install "$work"/dist/horovod-*.whl; }
                fn_step horovod-install install_horovod && horovod=yes
                # Back with the results, in pieces under 16 MiB, for a later run to carry in .gpu/prebuilt/.
                wheel=$(ls "$work"/dist/horovod-*.whl | head -n 1)
                (cd "$out" && split -b 15m -d "$wheel" "$(basename "$wheel").part-")
                note "wheel: $(basename "$wheel") ($(du -h "$wheel" | cut -f1)) for torch $torch_version, in $(ls "$out" | grep -c '\.part-') pieces"
            else
                note "FAIL horovod-build ($((SECONDS - started)) s, limit $limit s); the build log's last error lines:
$(grep -iE 'error|fatal|killed|timed out' "$out/horovod-build.log" | tail -n 20 | sed 's/^/    /')
$(tail -n 5 "$out/horovod-build.log" | sed 's/^/    /')"
            fi
        else
            sed 's/^/    /' "$work/logs/horovod-prepare.log" >> "$log"
        fi
        ;;
esac

if [ "$horovod" = yes ]; then
    step horovod-check-build 120 horovodrun --check-build && sed 's/^/    /' "$work/logs/horovod-check-build.log" >> "$log"
    # The smallest use of each path the runs take: Gloo for CPU tensors, NCCL for CUDA tensors.
    step horovod-probe 90 "$PY" -c "
import torch, horovod.torch as hvd
hvd.init()
print('size', hvd.size(), 'nccl_built', hvd.nccl_built(), 'gloo_built', hvd.gloo_built(), 'mpi_built', hvd.mpi_built())
cpu = hvd.allreduce(torch.arange(4.0), name='cpu')
assert torch.equal(cpu, torch.arange(4.0)), cpu
if '$device' == 'cuda':
    assert hvd.nccl_built(), 'Horovod was built without NCCL'
    gpu = hvd.allreduce(torch.arange(4.0, device='cuda'), name='gpu')
    assert gpu.is_cuda and torch.equal(gpu.cpu(), torch.arange(4.0)), gpu
    half = hvd.allreduce(torch.ones(8, device='cuda'), compression=hvd.Compression.fp16, name='half')
    assert half.dtype == torch.float32 and torch.equal(half.cpu(), torch.ones(8)), half
print('allreduce on CPU and', '$device', 'ok')
hvd.shutdown()
" && sed 's/^/    /' "$work/logs/horovod-probe.log" >> "$log"
fi

wait "$no_build_runs"

if [ "$project_runs" != 1 ]; then
    note "SKIP the project's runs, checks and timing: GPU_CHECK_RUNS=$project_runs"
elif [ "$horovod" = yes ]; then
    for name in "${names[@]}"; do
        # shellcheck disable=SC2086
        hvd_run "$name" ${config[$name]}
    done
else
    for name in "${names[@]}"; do note "SKIP hvd-$name: no Horovod build"; done
fi

# --- 4. parity ---------------------------------------------------------------------------------------------
# check NAME A B EXPECT [ARGS...]: python -m compare check on two run directories. EXPECT: holds (exit 0), fails
# (a control that must fail: 1, or 5 when the check sees two different jobs), not-fails (holds, or 4: undecided)
# or info (any verdict, logged as INFO).
check() {
    [ "$project_runs" = 1 ] || return 0
    local name=$1 a=$2 b=$3 expect=$4 rc verdict passed=no
    shift 4
    if [ ! -f "$work/runs/$a/run.json" ] || [ ! -f "$work/runs/$b/run.json" ]; then
        note "SKIP check-$name: no record of $( [ -f "$work/runs/$a/run.json" ] && echo "$b" || echo "$a")"
        return
    fi
    "$PY" -m compare check "$work/runs/$a" "$work/runs/$b" "$@" > "$work/logs/check-$name.log" 2>&1
    rc=$?
    case "$expect:$rc" in holds:0|fails:1|fails:5|not-fails:0|not-fails:4) passed=yes ;; esac
    verdict=$(grep -E '^(seed [0-9]+:|parity |different jobs|python -m compare: error)' "$work/logs/check-$name.log" \
        | sed 's/^/    /')
    if [ "$expect" = info ]; then
        note "INFO check-$name ($a vs $b${*:+ $*}: exit $rc)
$verdict"
    elif [ "$passed" = yes ]; then
        note "PASS check-$name ($a vs $b${*:+ $*}: exit $rc, expected: $expect)
$verdict"
    else
        note "FAIL check-$name ($a vs $b${*:+ $*}: exit $rc, expected: $expect):
$(sed 's/^/    /' "$work/logs/check-$name.log")"
    fi
}
# The runs that compute reproducibly are held to the default band: every step.
for name in plain amp fp16; do
    check "hvd-ddp-$name" "hvd-$name" "ddp-$name" holds
done
for name in plain amp; do   # the reference has no gradient compression: fp16 against it is in summary.json only
    check "ddp-ref-$name" "ddp-$name" "ref-$name" holds
done
# SyncBatchNorm on the resnet: against the band of the repeated DDP run (from step 2); one seed leaves the end
# points undecided once that band saturates, so "undecided" (exit 4) is the expected best here.
calibration=(--calibration "$work/runs/ddp-syncbn" "$work/runs/ddp-syncbn-again" --k 1)
if [ -f "$work/runs/ddp-syncbn-again/run.json" ]; then
    check hvd-ddp-syncbn hvd-syncbn ddp-syncbn not-fails "${calibration[@]}"
    check ddp-ref-syncbn ddp-syncbn ref-syncbn not-fails "${calibration[@]}"
elif [ "$project_runs" = 1 ]; then
    note "SKIP check-hvd-ddp-syncbn, check-ddp-ref-syncbn: no record of ddp-syncbn-again to calibrate with"
fi
check repeat-syncbn ddp-syncbn ddp-syncbn-again info   # the nondeterminism itself, under the default band
check control-plain-vs-amp ddp-plain ddp-amp fails

# --- 5. timing, once the build no longer loads the machine ----------------------------------------------------
timing_job=(--workload resnet --steps 200 --batch-size 64 --dataset-size 12800 --log-every 50)
mlp_timing_job=(--workload mlp --steps 300 --log-every 50)
for pair in resnet mlp; do
    if [ "$project_runs" != 1 ]; then
        continue
    elif [ "$device" != cuda ]; then
        note "SKIP timing-$pair: timing is for the GPU"
        continue
    elif ((budget - SECONDS < 100)); then
        note "SKIP timing-$pair: too little of the ${budget} s budget left"
        continue
    fi
    if [ "$pair" = resnet ]; then job=("${timing_job[@]}"); else job=("${mlp_timing_job[@]}"); fi
    ddp_run "time-$pair" "${job[@]}"
    [ "$horovod" = yes ] && hvd_run "time-$pair" "${job[@]}"
done

if [ "$pytest_too" = 1 ]; then
    step pytest-test_cuda $((budget - SECONDS)) "$PY" -m pytest tests/test_cuda.py -q -rs -p no:cacheprovider \
        && tail -n 3 "$work/logs/pytest-test_cuda.log" | sed 's/^/    /' >> "$log"
fi

# --- 6. summary and records ----------------------------------------------------------------------------------
"$PY" - "$work/runs" "$out/summary.json" <<'EOF' >> "$log" 2>&1 || note "FAIL summary"
"""Per run: status, step times (steps after the first 5), last loss; per pair: the largest relative loss gap."""
import json, sys
from pathlib import Path
import numpy as np

runs_dir, summary_path = Path(sys.argv[1]), Path(sys.argv[2])
runs, losses = {}, {}
for run in sorted(p for p in runs_dir.iterdir() if p.is_dir()):
    meta_path = run / "run.json"
    if not meta_path.exists():
        runs[run.name] = {"status": "no record"}
        continue
    meta = json.loads(meta_path.read_text())
    metrics = run / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics.read_text().splitlines()] if metrics.exists() else []
    steps = [r for r in rows if r["kind"] == "step"]
    evals = [r for r in rows if r["kind"] == "eval"]
    times = np.array([r["step_time_s"] for r in steps[5:]]) * 1e3
    losses[run.name] = [r["loss"] for r in steps]
    runs[run.name] = {
        "status": meta["status"], "error": meta.get("error"), "framework": meta.get("framework"),
        "launcher": meta.get("launcher"), "backend": meta.get("backend"), "device": meta.get("device"),
        "world_size": meta.get("world_size"), "steps": len(steps), "versions": meta.get("versions"),
        "gpus": meta.get("host", {}).get("gpus"), "duration_s": meta.get("duration_s"),
        "median_step_ms": round(float(np.median(times)), 3) if times.size else None,
        "p90_step_ms": round(float(np.percentile(times, 90)), 3) if times.size else None,
        "samples_per_s": (round(meta["samples_per_step"] / float(np.median(times)) * 1e3, 1)
                          if times.size and meta.get("samples_per_step") else None),
        "first_loss": losses[run.name][0] if steps else None, "last_loss": losses[run.name][-1] if steps else None,
        "eval_loss": evals[-1].get("eval_loss") if evals else None,
        "eval_accuracy": evals[-1].get("eval_accuracy") if evals else None,
    }

def gap(a, b, k=20):
    n = min(len(a), len(b))
    if n == 0:
        return None
    a, b = np.array(a[:n]), np.array(b[:n])
    rel = np.abs(a - b) / np.maximum(np.maximum(np.abs(a), np.abs(b)), np.finfo(float).tiny)
    return {"steps": n, "max_rel_diff_first_20": float(rel[:k].max()), "max_rel_diff_all": float(rel.max())}

pairs = {}
for name in ("plain", "amp", "syncbn", "fp16", "time-resnet", "time-mlp"):
    for a, b in ((f"hvd-{name}", f"ddp-{name}"), (f"ddp-{name}", f"ref-{name}"), (f"hvd-{name}", f"ref-{name}")):
        if a in losses and b in losses:
            pairs[f"{a} vs {b}"] = gap(losses[a], losses[b])
if "ddp-plain" in losses and "ddp-amp" in losses:
    pairs["ddp-plain vs ddp-amp (control)"] = gap(losses["ddp-plain"], losses["ddp-amp"])
if "ddp-syncbn" in losses and "ddp-syncbn-again" in losses:
    pairs["ddp-syncbn vs ddp-syncbn-again (repeat)"] = gap(losses["ddp-syncbn"], losses["ddp-syncbn-again"])
summary = {"runs": runs, "pairs": pairs}
summary_path.write_text(json.dumps(summary, indent=2) + "\n")

def cell(value, spec):
    return "-" if value is None else format(value, spec)

print("    run                 status  steps  median ms   p90 ms  samples/s  last loss")
for name, r in runs.items():
    if r.get("framework") is None:
        print(f"    {name:19} {r['status']}")
        continue
    print(f"    {name:19} {r['status']:6} {r['steps']:6} {cell(r['median_step_ms'], '10.3f')} "
          f"{cell(r['p90_step_ms'], '8.3f')} {cell(r['samples_per_s'], '10.1f')}  {cell(r['last_loss'], '.6f')}")
print("    pair                                    max rel diff, first 20 steps   all steps")
for name, p in pairs.items():
    print(f"    {name:40} {cell(p and p['max_rel_diff_first_20'], '.3e'):>10}  {cell(p and p['max_rel_diff_all'], '.3e'):>10}")
EOF
tar -czf "$out/gpu-runs.tar.gz" -C "$work" runs logs && note "records: gpu-runs.tar.gz ($(du -h "$out/gpu-runs.tar.gz" | cut -f1))"

failed=$(grep -c '^[0-9:]* FAIL ' "$log")
note "done in $SECONDS s: $(grep -c '^[0-9:]* PASS ' "$log") passed, $failed failed, $(grep -c '^[0-9:]* SKIP ' "$log") skipped"
((failed == 0))
