#!/usr/bin/env bash
# Real long run records for the onset bound's tests (tests/test_onset.py): the mlp workload trained by torchrun
# at np 2, 30 epochs (1920 steps), logged every 5 steps. Rerun from the project root:
#   bash tests/data/long/make.sh
#   base:     seed 0
#   ulp:      the same with the initial weights moved one ulp (a run of the same job whose float chaos grows
#             from 1e-7 until it saturates: identical but chaotic)
#   lr30:     seed 0 with the learning rate 30x from step 1500 on (a late learning-rate jump; 100x blows up to
#             NaN by step 1522)
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=tests/data/long
run() { local name=$1; shift
    rm -rf "${out:?}/$name"
    OMP_NUM_THREADS=1 .venv/bin/torchrun --standalone --nproc-per-node 2 -m native_impl --workload mlp \
        --epochs 30 --log-every 5 --seed 0 --out "$out/$name" "$@"
    rm -f "$out/$name"/.job-rank-*
}
[ "${1:-}" = lr30 ] || { run base; run ulp --perturb-init-ulps 1; }
run lr30 --lr-change-at-step 1500 --lr-change-factor 30
