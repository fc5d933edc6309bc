"""Fixtures shared by the tests (helper functions are in tests/helpers.py)."""

from __future__ import annotations

import pytest
from helpers import run, tool


@pytest.fixture(scope="session")
def horovod_built() -> None:
    result = run([tool("horovodrun"), "--check-build"], timeout=300)
    if result.returncode != 0:
        pytest.fail(f"Horovod is not installed: run scripts/setup.sh\n{result.stderr}")
