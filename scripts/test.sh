#!/usr/bin/env bash
# The test suite in two stages (make test): the tests that start no launcher, in parallel on every core
# (pytest-xdist), then the tests that launch real multi-process jobs, one at a time so that their ranks do
# not oversubscribe the cores. Both stages run even when the first fails; the exit status is the worse one.
# Each stage prints its 20 slowest tests and its total time. Extra arguments go to both pytest runs.
set -uo pipefail
PY=${PY:-.venv/bin/python}
workers=${TEST_WORKERS:-$(env -u OMP_NUM_THREADS nproc)}
status=0
stage() {
    local name=$1; shift
    local start; start=$(date +%s)
    "$PY" -m pytest "$@"
    local code=$?
    [ "$code" -eq 5 ] && code=0   # a selection with no test in it (e.g. -k) is not a failure of the stage
    echo "stage $name: $(( $(date +%s) - start )) s (exit $code)"
    [ "$code" -gt "$status" ] && status=$code
}
stage "no launches (-n $workers)" -m "not slow and not campaign" -n "$workers" "$@"
stage "launches" -m "slow and not campaign" "$@"
exit "$status"
