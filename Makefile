# The commands a user types. Everything runs inside the project's virtual environment (.venv),
# which `make setup` creates (Open MPI, torch, the patched Horovod build, the project).
PY ?= .venv/bin/python
OUT ?= results/latest

.PHONY: setup compare test test-fast lint clean docker-test

setup:
	bash scripts/setup.sh

compare:
	$(PY) -m compare run --out $(OUT)

test:
	$(PY) -m pytest

test-fast:
	$(PY) -m pytest -m "not slow"

lint:
	$(PY) -m ruff check .

docker-test:
	bash scripts/docker-test.sh

clean:
	rm -rf results runs .pytest_cache .ruff_cache
