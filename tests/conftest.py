"""Fixtures shared by the tests (helper functions are in tests/helpers.py)."""

from __future__ import annotations

import pytest
from helpers import run, tool

# The launch tests of these files run alone, after the others (scripts/test.sh's third stage): their verdicts
# read the machine's load (speed, contention, benchmarks), or they scan every listening socket (security),
# or they build a container image with all cores.
SERIAL_FILES = {"test_speed.py", "test_bench.py", "test_security.py", "test_docker.py"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in SERIAL_FILES and item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.serial)


@pytest.fixture(scope="session")
def horovod_built() -> None:
    result = run([tool("horovodrun"), "--check-build"], timeout=300)
    if result.returncode != 0:
        pytest.fail(f"Horovod is not installed: run scripts/setup.sh\n{result.stderr}")
