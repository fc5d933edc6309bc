"""Fixtures shared by the tests (helper functions are in tests/helpers.py)."""

from __future__ import annotations

import pytest
from helpers import run, tool

# The launch tests of these files run alone, after the others (scripts/test.sh's third stage): what they
# judge reads the machine's load (speed verdicts, contention). The rest may run two files at a time
# (LAUNCH_WORKERS=2): each test watches only its own processes and namespaces. test_bench.py is not here: it
# asserts that every figure is there, never a figure's size.
SERIAL_FILES = {"test_speed.py", "test_timed_windows.py"}  # the A/A verdict reads the load too


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in SERIAL_FILES and item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.serial)


@pytest.fixture(scope="session")
def horovod_built() -> None:
    result = run([tool("horovodrun"), "--check-build"], timeout=300)
    if result.returncode != 0:
        pytest.fail(f"Horovod is not installed: run scripts/setup.sh\n{result.stderr}")
