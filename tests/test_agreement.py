"""The two implementations are the same job: Horovod, DDP and one process agree step by step.

In float32 on CPU, with Horovod's tensor fusion off and DDP at its defaults, the per-step loss agrees to a
relative 1e-5 over the first 20 steps three ways. The same check must fail when one side trains with
another seed, learning rate or data shard: otherwise it would prove nothing.
"""

from __future__ import annotations

import pytest
from helpers import horovodrun, ok, read_losses, reference, torchrun

from compare.analysis.parity import stepwise

pytestmark = pytest.mark.slow
JOB = ["--workload", "mlp", "--steps", "20", "--batch-size", "16", "--dataset-size", "1024", "--seed", "7"]
RTOL = 1e-5


@pytest.fixture(scope="module")
def three_ways(tmp_path_factory, horovod_built):
    root = tmp_path_factory.mktemp("agreement")
    ok(horovodrun(2, "gloo", *JOB, "--out", str(root / "hvd"), HOROVOD_FUSION_THRESHOLD="0"))
    ok(torchrun(2, *JOB, "--out", str(root / "ddp")))
    ok(reference(2, *JOB, "--out", str(root / "ref")))
    return {name: read_losses(root / name) for name in ("hvd", "ddp", "ref")}


@pytest.mark.parametrize("a,b", [("hvd", "ddp"), ("hvd", "ref"), ("ddp", "ref")])
def test_agree_over_first_20_steps(three_ways, a, b):
    result = stepwise(three_ways[a], three_ways[b], k=20, rtol=RTOL)
    assert result.n_common >= 20
    assert result.passed, f"{a} vs {b}: max relative difference {result.max_rel_diff:.2e} at step " \
                          f"{result.max_at_step}"
    assert three_ways[a][-1] < three_ways[a][0]  # and it does learn


@pytest.mark.parametrize("change", [
    ["--seed", "8"],                       # another initialisation and shuffle
    ["--lr", "0.06"],                      # another learning rate (default 0.05)
    ["--data-seed", "99"],                 # another data order, same model
])
def test_divergence_is_caught(tmp_path, three_ways, change):
    job = JOB + change  # argparse takes the last occurrence
    ok(torchrun(2, *job, "--out", str(tmp_path)))
    result = stepwise(three_ways["hvd"], read_losses(tmp_path), k=20, rtol=RTOL)
    assert not result.passed
    assert result.first_divergence_step is not None


def test_wrong_data_shard_is_caught(tmp_path, three_ways):
    # Both workers reading rank 0's shard: what a DistributedSampler built without the rank does.
    ok(reference(2, *JOB, "--emulate-ranks", "0,0", "--out", str(tmp_path)))
    result = stepwise(three_ways["ref"], read_losses(tmp_path), k=20, rtol=RTOL)
    assert not result.passed
