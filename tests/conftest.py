"""Fixtures shared by the tests (helper functions are in tests/helpers.py)."""

from __future__ import annotations

import pytest
from helpers import run, tool

# The launch tests of these files run alone, after the others (scripts/test.sh's third stage): what they
# judge reads the machine's load (speed verdicts, contention). The rest may run two files at a time
# (LAUNCH_WORKERS=2): each test watches only its own processes and namespaces. test_bench.py is not here: it
# asserts that every figure is there, never a figure's size.
SERIAL_FILES = {"test_speed.py", "test_timed_windows.py"}  # the A/A verdict reads the load too


# Seconds of launches per file in the launch stage (results/tests/stage-2.xml of a make test, 2026-12-06), to
# hand the files to the two workers longest first: pytest-xdist's --dist loadfile gives a worker the next file as
# it finishes one, and its default order (most tests first) left the long files of few tests (test_migrate_ray,
# test_bench) to the end, where one worker ran them while the other stood idle (46 s of that stage's wall time).
# A file not named here goes last; name a new file of more than a minute.
LAUNCH_SECONDS = {
    "test_features.py": 441, "test_fixture_repos.py": 415, "test_parity_launchers.py": 244,
    "test_horovod_styles.py": 207, "test_migrate_ray.py": 176, "test_migrate.py": 173, "test_faults.py": 166,
    "test_compare.py": 165, "test_migrate_spark.py": 144, "test_slurm.py": 130, "test_migrate_collectives.py": 130,
    "test_bench.py": 121, "test_own_job.py": 112, "test_launchers.py": 111, "test_multihost.py": 90,
    "test_walkthrough.py": 78, "test_migrate_zero_step.py": 65, "test_migrate_speed.py": 64, "test_spawn.py": 51,
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in SERIAL_FILES and item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.serial)
    if config.getoption("dist", "no") == "loadfile":  # scripts/test.sh's launch stage (with --no-loadscope-reorder)
        items.sort(key=lambda item: -LAUNCH_SECONDS.get(item.path.name, 0))  # stable: a file's order stays


@pytest.fixture(scope="session")
def horovod_built() -> None:
    result = run([tool("horovodrun"), "--check-build"], timeout=300)
    if result.returncode != 0:
        pytest.fail(f"Horovod is not installed: run scripts/setup.sh\n{result.stderr}")
