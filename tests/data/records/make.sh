#!/usr/bin/env bash
# Real run records for the judge's numerics tests (tests/test_numerics.py): the digits workload trained by
# torchrun at np 2, 6 epochs (132 steps), logged every step. Rerun from the project root:
#   bash tests/data/records/make.sh
#   base-s0, base-s1: seeds 0 and 1
#   ulp-s0, ulp-s1:   the same with the initial weights moved one ulp (each seed's calibration pair)
#   lr5-s0:           seed 0 with the learning rate 5% higher from step 30 on (a real divergence)
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=tests/data/records
run() { local name=$1; shift
    rm -rf "${out:?}/$name"
    OMP_NUM_THREADS=1 .venv/bin/torchrun --standalone --nproc-per-node 2 -m native_impl --workload digits \
        --epochs 6 --log-every 1 --out "$out/$name" "$@"
    rm -f "$out/$name"/.job-rank-*
}
run base-s0 --seed 0
run base-s1 --seed 1
run ulp-s0 --seed 0 --perturb-init-ulps 1
run ulp-s1 --seed 1 --perturb-init-ulps 1
run lr5-s0 --seed 0 --lr-change-at-step 30 --lr-change-factor 1.05
