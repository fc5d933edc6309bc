"""The launcher-detection table (workload/launchers.py): what each launcher leaves in a worker's environment."""

from __future__ import annotations

import pytest

from workload import launchers
from workload.launchers import detect_launcher, launcher_rank


@pytest.mark.parametrize(("framework", "environ", "expected"), [
    ("ddp", {"RANK": "1", "TORCHELASTIC_RUN_ID": "x"}, "torchrun"),
    ("ddp", {"RANK": "1", "SLURM_PROCID": "1"}, "srun"),
    ("ddp", {"RANK": "1"}, "env"),
    ("ddp", {}, "none"),
    ("ddp", {"OMPI_COMM_WORLD_RANK": "0"}, "none"),  # mpirun sets no RANK: DDP starts a group of one
    ("horovod", {"HOROVOD_RANK": "0"}, "horovodrun"),
    ("horovod", {"OMPI_COMM_WORLD_RANK": "0"}, "mpirun"),
    ("horovod", {"PMI_RANK": "0"}, "mpirun"),
    ("horovod", {"PMIX_RANK": "0", "SLURM_PROCID": "0"}, "srun"),
    ("horovod", {"RANK": "0"}, "none"),
    ("horovod", {"WORKLOAD_LAUNCHER": "horovod.run", "HOROVOD_RANK": "0"}, "horovod.run"),
    ("ddp", {"WORKLOAD_LAUNCHER": "spawn", "RANK": "0"}, "spawn"),
])
def test_each_launcher_is_told_by_its_variables(framework, environ, expected):
    assert detect_launcher(framework, environ) == expected


def test_horovodrun_mpi_is_told_from_mpirun_by_its_process_tree(monkeypatch):
    rows = [row if row.check is None else launchers.Launcher(row.name, row.frameworks, row.rank, row.also,
                                                             check=lambda: True) for row in launchers.LAUNCHERS]
    monkeypatch.setattr(launchers, "LAUNCHERS", tuple(rows))
    assert detect_launcher("horovod", {"OMPI_COMM_WORLD_RANK": "0"}) == "horovodrun"
    assert not launchers.under_horovodrun_mpi()  # pytest itself runs under no horovodrun


@pytest.mark.parametrize(("environ", "rank"), [
    ({}, 0), ({"RANK": "3"}, 3), ({"HOROVOD_RANK": "2"}, 2), ({"OMPI_COMM_WORLD_RANK": "1"}, 1),
    ({"PMI_RANK": "4"}, 4), ({"PMIX_RANK": "5", "SLURM_PROCID": "5"}, 5),
])
def test_the_rank_is_known_before_any_framework_starts(environ, rank):
    assert launcher_rank(environ) == rank
