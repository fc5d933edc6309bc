# The commands a user types. Everything runs inside the project's virtual environment (.venv).
# `make compare` and `make test` run the set-up first when it is missing or stale (scripts/setup.sh --if-stale:
# Open MPI and OpenSSH from Debian packages, torch, the patched Horovod build, the project; docs/setup.md);
# `make setup` runs it unconditionally.
# The set-up's choices are variables, given once and kept (its stamp records them): `make setup EXTRAS=slurm`
# (Debian's Slurm, munge and PMIx, for the Slurm tests, which skip without them), EXTRAS=ray,spark (Ray Train,
# pyspark: compare migrate of Horovod jobs run through Ray or Spark), TORCH_VERSION=2.12.0. They are not
# defined here: a variable left unset is what lets the set-up keep the recorded choice.
PY ?= .venv/bin/python
OUT ?= results/run

.PHONY: setup ensure-setup compare test test-fast test-campaign lint samples clean docker-test

setup:
	bash scripts/setup.sh

ensure-setup:
	@bash scripts/setup.sh --if-stale

compare: ensure-setup
	$(PY) -m compare run --out $(OUT)

# Three stages (scripts/test.sh, docs/testing.md): the tests that start no launcher in parallel, the launches two
# test files at a time, then the launch tests whose verdicts read the machine's load one at a time. About 34
# minutes on 2 cores; `make test-fast` runs only the tests that start no launcher.
test: ensure-setup
	PY=$(PY) bash scripts/test.sh

test-fast: ensure-setup
	$(PY) -m pytest -m "not slow and not campaign" -n auto

test-campaign: ensure-setup
	$(PY) -m pytest -m campaign

lint: ensure-setup
	$(PY) -m ruff check .

# Every sample of output in README.md and docs/, made again from its commands with the date and commit
# (scripts/readme_samples.py; tests/test_doc_samples.py holds each to its command). Some launch training for
# minutes (bench, matrix, faults: about half an hour in all; the parity defaults' campaign behind docs/parity.md's
# headroom tables, scripts/parity_headroom.py: 17 minutes more) and their speed figures are the machine's: run it
# on a quiet machine set up with EXTRAS=slurm,ray,spark, as root (the Slurm samples start the tests' private
# cluster), then commit the pages and docs/samples/.
samples: ensure-setup
	$(PY) scripts/readme_samples.py

docker-test:
	bash scripts/docker-test.sh

clean:
	rm -rf results runs .pytest_cache .ruff_cache
