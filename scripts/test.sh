#!/usr/bin/env bash
# The test suite in three stages (make test):
#   1. the tests that start no launcher, in parallel on every core (pytest-xdist);
#   2. the launch tests whose outcome does not depend on the machine being idle, two test files at a time
#      (--dist loadfile keeps a file's module-scoped launches in one worker, so each runs once; the longest files
#      first, tests/conftest.py LAUNCH_SECONDS, so that neither worker is left alone with a long one): about 1.4x
#      faster than one at a time on 2 cores, the launches being CPU-bound. LAUNCH_WORKERS=1 runs them one at
#      a time (or more workers on a bigger machine);
#   3. the launch tests marked `serial` (speed verdicts, contention, the A/A twin), one at a time.
# All stages run even when one fails; the exit status is the worst. Each stage prints its 20 slowest tests
# and its total time, and writes every test's time to results/tests/stage-N.xml (JUnit), the figures to
# plan the suite's budget with. Extra arguments go to every pytest run.
set -uo pipefail
PY=${PY:-.venv/bin/python}
workers=${TEST_WORKERS:-$(env -u OMP_NUM_THREADS nproc)}
launch_workers=${LAUNCH_WORKERS:-2}
status=0
number=0
mkdir -p results/tests
stage() {
    local name=$1; shift
    local start; start=$(date +%s)
    number=$((number + 1))
    "$PY" -m pytest --junitxml="results/tests/stage-$number.xml" "$@"
    local code=$?
    [ "$code" -eq 5 ] && code=0   # a selection with no test in it (e.g. -k) is not a failure of the stage
    echo "stage $name: $(( $(date +%s) - start )) s (exit $code)"
    [ "$code" -gt "$status" ] && status=$code
}
stage "no launches (-n $workers)" -m "not slow and not campaign" -n "$workers" "$@"
# Open MPI busy-polls while a rank waits: beside another test file's launches its ranks would burn the cores
# both need. The launch stage's outcomes do not depend on how MPI waits, so there its ranks yield; the serial
# stage, whose speed verdicts report the default's busy-polling, runs with the user's setting.
yield_mpi=${OMPI_MCA_mpi_yield_when_idle:-1}
if [ "$launch_workers" -gt 1 ]; then
    OMPI_MCA_mpi_yield_when_idle=$yield_mpi stage "launches (-n $launch_workers, by file)" \
        -m "slow and not serial and not campaign" -n "$launch_workers" --dist loadfile --no-loadscope-reorder "$@"
else
    OMPI_MCA_mpi_yield_when_idle=$yield_mpi stage "launches" -m "slow and not serial and not campaign" "$@"
fi
stage "serial launches" -m "slow and serial and not campaign" "$@"
exit "$status"
