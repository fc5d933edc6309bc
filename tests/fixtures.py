"""Synthetic run directories in the run-record format (docs/run-record.md), for tests."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

DEFAULT_OPTIONS = {
    "workload": "mlp",
    "epochs": 1,
    "steps": None,
    "batch_size": 32,
    "lr": 0.05,
    "lr_scaling": "none",
    "optimizer": "sgd",
    "momentum": 0.9,
    "weight_decay": 0.0,
    "seeds": [0],
    "threads": 1,
    "out": "runs/test",
    "log_every": 10,
}
LAUNCHERS = {"horovod": ("horovodrun", "gloo"), "ddp": ("torchrun", "gloo"), "reference": ("none", "none")}


def write_run(
    dir: Path | str,
    *,
    framework: str,
    world_size: int,
    seed: int,
    losses: Sequence[float],
    step_times: Sequence[float] | None = None,
    status: str = "ok",
    data_world_size: int | None = None,
    options: dict | None = None,
    evals: list[dict] | None = None,
    env: dict | None = None,
    truncate_last_line: bool = False,
    extra_meta: dict | None = None,
    first_step: int = 1,
    steps_per_epoch: int | None = None,
) -> Path:
    """Write one run directory and return it.

    options are merged over DEFAULT_OPTIONS. A run whose status is not "ok" gets metrics.jsonl.part, as a
    real interrupted run would. evals: dicts with at least eval_loss (kind and step are filled in).
    extra_meta overrides run.json fields (e.g. {"schema_version": 2}). Steps are numbered from first_step;
    with steps_per_epoch, the epoch field counts epochs of that many steps.
    """
    run_dir = Path(dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    opts = {**DEFAULT_OPTIONS, **(options or {}), "seeds": [seed]}
    data_ws = data_world_size or world_size
    global_batch = opts["batch_size"] * data_ws
    times = list(step_times) if step_times is not None else [0.01] * len(losses)
    launcher, backend = LAUNCHERS.get(framework, ("none", "none"))
    meta = {
        "schema_version": 1,
        "status": status,
        "error": None if status == "ok" else "worker exited with status 1",
        "framework": framework,
        "launcher": launcher,
        "backend": backend,
        "world_size": world_size,
        "data_world_size": data_ws,
        "seed": seed,
        "options": opts,
        "effective_lr": opts["lr"],
        "threads": opts["threads"],
        "versions": {"python": "3.11.7", "torch": "2.13.0+cpu", "horovod": "0.28.1", "numpy": "2.4.6"},
        "host": {"hostname": "test", "platform": "Linux", "cpu_model": "test cpu", "cpu_count": 2,
                 "memory_gib": 8.0, "gpus": []},
        "env": env or {},
        "start_time": "2026-11-30T09:40:00+00:00",
        "end_time": "2026-11-30T09:40:07+00:00",
        "duration_s": float(sum(times)),
        "steps": first_step + len(losses) - 1,
        "samples_per_step": global_batch,
        **(extra_meta or {}),
    }
    (run_dir / "run.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")

    lines = []
    for i, (loss, t) in enumerate(zip(losses, times, strict=True), start=first_step):
        epoch = (i - 1) // steps_per_epoch if steps_per_epoch else 0
        lines.append({
            "kind": "step", "step": i, "epoch": epoch, "loss": None if loss is None else float(loss),
            "lr": opts["lr"],
            "samples": i * global_batch, "step_time_s": float(t), "data_s": 0.05 * t,
            "forward_s": 0.25 * t, "backward_s": 0.45 * t, "optimizer_s": 0.2 * t,
        })
    for e in evals or []:
        lines.append({"kind": "eval", "step": first_step + len(losses) - 1, "epoch": 0, **e})
    text = "".join(json.dumps(line) + "\n" for line in lines)
    if truncate_last_line and lines:
        last = json.dumps(lines[-1])
        text = text[: -(len(last) + 1)] + last[: len(last) // 2]
    name = "metrics.jsonl" if status == "ok" else "metrics.jsonl.part"
    (run_dir / name).write_text(text, encoding="utf-8")
    return run_dir
