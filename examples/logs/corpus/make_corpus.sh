#!/usr/bin/env bash
# Re-captures the launcher logs of the corpus (from the repository root, after `make setup`):
#   bash examples/logs/corpus/make_corpus.sh
# The other samples are made by their own scripts (the command is in each script's header).
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$PWD/../../../.venv/bin:$PATH" OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
horovodrun -np 2 --mpi python launched.py --name horovodrun_mpi > horovodrun_mpi.log 2>&1
horovodrun -np 2 --gloo python launched.py --name horovodrun_gloo > horovodrun_gloo.log 2>&1
mpirun -np 2 --allow-run-as-root --oversubscribe --tag-output python launched.py --name mpirun_tagged --log-interval 3 \
    > mpirun_tagged.log 2>&1
torchrun --standalone --nproc-per-node 2 --tee 3 launched.py --name torchrun_tee --log-interval 3 \
    > torchrun_tee.log 2>&1
python launched.py --name epoch_step_every5 --style epoch-step --log-interval 5 > epoch_step_every5.log 2>&1
python launched.py --name epoch_step_every2 --style epoch-step --log-interval 2 > epoch_step_every2.log 2>&1
# Hand-shaped from the mpirun log, since neither launcher is installed here: Intel MPI / MPICH
# `mpiexec -prepend-rank` writes "[R] " before each line, `srun --label` writes "R: " (stdout and stderr alike).
sed -E 's/^\[1,([0-9]+)\]<std(out|err)>:/[\1] /' mpirun_tagged.log > mpich_prepend_rank.log
sed -E 's/^\[1,([0-9]+)\]<std(out|err)>:/\1: /' mpirun_tagged.log > srun_label.log
cp mpirun_tagged.expected.json mpich_prepend_rank.expected.json
cp mpirun_tagged.expected.json srun_label.expected.json
