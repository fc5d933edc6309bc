"""python -m compare matrix: every training feature a Horovod user relies on, in its idiomatic form on each
side, run at np 2 on a small workload and compared: parity, speed ratio, or why there is no comparison.

The features and their launches are here; a row's verdict is a pure function of its run records
(compare/analysis/matrix.py), put in words and the table by compare/render/matrix.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from compare.analysis.matrix import Feature, judge_feature, judge_resume
from compare.analysis.parity import MIN_OVERLAP, STEP_RTOL
from compare.analysis.records import RecordError, RunRecord, load_run
from compare.commands.arguments import analysis_settings
from compare.launch.lines import build_launch
from compare.launch.process import run_launch
from compare.names import FRAMEWORKS, Exit, Parity
from compare.render.blocks import render_markdown
from compare.render.matrix import Row, feature_row, matrix_markdown, matrix_table
from workload.errors import UsageError
from workload.files import write_atomic, write_json_atomic
from workload.options import Options
from workload.record_format import RUN_JSON
from workload.workloads import load_workload

MATRIX_SCHEMA_VERSION = 1

# The matrix's declaration: each feature in its idiomatic form on each side, and how it is judged.
FEATURES: tuple[Feature, ...] = (
    Feature("plain data parallel (baseline)", "hvd.DistributedOptimizer + broadcast_parameters",
            "DistributedDataParallel"),
    Feature("fp16 gradient compression", "compression=hvd.Compression.fp16",
            "register_comm_hook(fp16_compress_hook)", ("--compression", "fp16"), ("--compression", "fp16")),
    Feature("gradient accumulation (k=2)", "backward_passes_per_step=2", "no_sync() on the first k-1",
            ("--accum-steps", "2"), ("--accum-steps", "2")),
    Feature("mixed precision", "autocast; optimizer.synchronize() + skip_synchronize() with a scaler on CUDA",
            "autocast; GradScaler on CUDA", ("--amp",), ("--amp",),
            note="bfloat16 autocast on CPU, float16 with a gradient scaler on CUDA"),
    Feature("gradient clipping (global norm 0.5)", "optimizer.synchronize(); clip; skip_synchronize(): step()",
            "clip after backward(); step()", ("--clip-norm", "0.5"), ("--clip-norm", "0.5")),
    Feature("lr scaling x world size + warm-up", "lr x hvd.size(), LambdaLR warm-up",
            "lr x world_size, LambdaLR warm-up", ("--lr-scaling", "linear", "--warmup-steps", "5"),
            ("--lr-scaling", "linear", "--warmup-steps", "5")),
    Feature("uneven inputs", "hvd.join()", "torch.distributed.algorithms.Join([model])",
            ("--uneven-inputs",), ("--uneven-inputs",), kind="uneven",
            note="rank r takes r steps fewer per epoch; run into a second epoch and judged at every step and "
                 "evaluation past the join; hvd_impl broadcasts the last joiner's parameters after hvd.join(), "
                 "as DDP's Join does (without it: parity fails after the join)"),
    Feature("SyncBatchNorm", "hvd.SyncBatchNorm", "nn.SyncBatchNorm.convert_sync_batchnorm",
            ("--workload", "resnet", "--sync-bn", "--device", "cuda"),
            ("--workload", "resnet", "--sync-bn", "--device", "cuda"), kind="cuda-only",
            note="both refuse CPU tensors"),
    Feature("Adasum", "op=hvd.Adasum (MPI operations)", "no equivalent", ("--adasum",), (),
            kind="horovod-only", horovod_controller="mpi", parity_expected=False,
            note="compared with DDP's plain average: a different reduction by design"),
    Feature("ZeroRedundancyOptimizer", "no equivalent", "ZeroRedundancyOptimizer(optimizer_class=...)",
            (), ("--zero",), kind="ddp-only",
            note="shards optimizer state; the update is the same, so it is held to parity with Horovod's plain run"),
    Feature("PowerSGD", "no equivalent", "register_comm_hook(PowerSGDState(rank 2), powerSGD_hook)",
            (), ("--powersgd-rank", "2"), kind="ddp-only", parity_expected=False,
            note="low-rank (lossy) gradient compression, compared with Horovod's plain average"),
    Feature("communication tuning", "HOROVOD_FUSION_THRESHOLD=0 (fusion off)",
            "bucket_cap_mb=1, gradient_as_bucket_view=True",
            ("--fusion-threshold-mb", "0"),
            ("--bucket-cap-mb", "1", "--gradient-as-bucket-view"), kind="tuning",
            note="effect on step time against each framework's own defaults (the baseline row)"),
    Feature("checkpoint and resume, across frameworks", "rank 0 saves; broadcast_parameters/optimizer_state",
            "rank 0 saves; every rank loads", kind="resume",
            note="atomic save, torch.load(weights_only=True); Horovod's checkpoint resumed by DDP and back"),
    Feature("profiling", "HOROVOD_TIMELINE", "torch.profiler (both sides)", ("--profile",), ("--profile",),
            kind="profile"),
)


# --- processes ----------------------------------------------------------------------------------

def _launch(framework: str, args: list[str], out: Path, base: Options, controller: str, timeout: float,
            log: list[str]) -> RunRecord:
    from workload.options import build_parser, options_from_namespace

    argv = [*_to_args(base), *args]
    options = options_from_namespace(build_parser("matrix", "").parse_args([*argv, "--out", str(out)]))
    launch = build_launch(framework, 2, options, out, horovod_controller=controller)
    log.append(launch.shell_line())
    outcome = run_launch(launch, timeout)
    if not outcome.ok:
        raise RuntimeError(f"{outcome.describe()}: {outcome.log_tail.splitlines()[-1] if outcome.log_tail else ''}")
    return load_run(out)


def _to_args(options: Options) -> list[str]:
    from workload.options import to_argv

    argv = to_argv(options, out=Path("unused"), seeds=options.seeds)
    cut = argv.index("--out")
    return argv[:cut] + argv[cut + 2:]


def run_matrix(ns: argparse.Namespace) -> int:
    import torch

    out: Path = ns.out
    base = Options(workload=ns.workload, steps=ns.steps, dataset_size=2048, batch_size=16, seeds=(ns.seed,),
                   epochs=3, log_every=10)
    rows: list[Row] = []
    commands: list[str] = []
    baseline: tuple[RunRecord, RunRecord] | None = None
    full: dict[str, RunRecord] = {}
    features = [f for f in FEATURES if not ns.only or any(w.lower() in f.name.lower() for w in ns.only)]
    if FEATURES[0] not in features:
        features.insert(0, FEATURES[0])  # the baseline: tuning and resume rows measure against it
    for index, feature in enumerate(features, 1):
        print(f"[{index}/{len(features)}] {feature.name}", file=sys.stderr, flush=True)
        slug = "".join(c if c.isalnum() else "-" for c in feature.name.lower()).strip("-")
        try:
            if feature.kind == "cuda-only" and not torch.cuda.is_available():
                rows.append(Row(feature, "CUDA only", detail="not available on this device (no CUDA)"))
            elif feature.kind == "resume":
                rows.append(_resume_row(feature, out / slug, base, full, ns, commands))
            else:
                rows.append(_feature_row(feature, out / slug, base, ns, commands, baseline))
                if baseline is None:
                    baseline = (load_run(out / slug / "horovod"), load_run(out / slug / "ddp"))
                    full = dict(zip(FRAMEWORKS, baseline, strict=True))
        except (RuntimeError, RecordError) as exc:
            rows.append(Row(feature, "failed", detail=str(exc)))
        print(f"    {rows[-1].verdict}{': ' + rows[-1].detail if rows[-1].detail else ''}", file=sys.stderr)
    write_matrix(out, rows, commands, base)
    print(render_markdown([matrix_table(rows)]))
    print(f"matrix: {out / 'matrix.md'}  (also matrix.json)")
    if any(r.verdict == "failed" for r in rows):
        return Exit.RUN_FAILED
    return Exit.PARITY_FAILS if any(r.outcome is Parity.FAILS for r in rows) else Exit.OK


def past_one_epoch(base: Options, steps: int) -> int:
    """Steps that take an uneven-inputs run through its first join and into the second epoch."""
    from workload.step_plan import steps_per_epoch
    from workload.workloads import WORKLOADS

    data = WORKLOADS[base.workload].make_data(base.dataset_size, base.text_dir)
    return steps_per_epoch(base, len(data.train), 2) + max(steps // 2, 5)


def _feature_row(feature: Feature, root: Path, base: Options, ns: argparse.Namespace, commands: list[str],
                 baseline: tuple[RunRecord, RunRecord] | None) -> Row:
    more = ["--steps", str(past_one_epoch(base, ns.steps))] if feature.kind == "uneven" else []
    hvd = _launch("horovod", [*feature.horovod_args, *more], root / "horovod", base,
                  feature.horovod_controller, ns.timeout, commands)
    ddp = _launch("ddp", [*feature.ddp_args, *more], root / "ddp", base, "gloo", ns.timeout, commands)
    row = feature_row(judge_feature(feature, hvd, ddp, warmup=ns.warmup, rtol=ns.rtol, baseline=baseline))
    if feature.kind == "profile":
        files = sorted(p.name for side in FRAMEWORKS for p in (root / side).glob("*trace*"))
        timeline = (root / "horovod" / "horovod-timeline.json").exists()
        row.detail = f"Horovod timeline: {'written' if timeline else 'missing'}; torch traces: {len(files)}"
        row.effect["files"] = [str(p.relative_to(root.parent)) for p in root.rglob("*.json") if p.name != RUN_JSON]
    return row


def _resume_row(feature: Feature, root: Path, base: Options, full: dict[str, RunRecord],
                ns: argparse.Namespace, commands: list[str]) -> Row:
    half = max(2, ns.steps // 2)
    resumed = {}
    for writer, reader in (FRAMEWORKS, FRAMEWORKS[::-1]):
        part = _launch(writer, ["--steps", str(half), "--checkpoint-every", str(half)], root / f"{writer}-part",
                       base, "gloo", ns.timeout, commands)
        ckpt = part.path / "checkpoint.pt"
        resumed[f"{writer} -> {reader}"] = _launch(reader, ["--resume", str(ckpt)], root / f"{writer}-to-{reader}",
                                                   base, "gloo", ns.timeout, commands)
    return feature_row(judge_resume(feature, full, resumed, rtol=ns.rtol))


def write_matrix(out: Path, rows: list[Row], commands: list[str], base: Options) -> None:
    from workload import record_format

    document = {"schema_version": MATRIX_SCHEMA_VERSION, "world_size": 2, "base_options": base.as_record(),
                "rtol": STEP_RTOL, "rows": [row.to_dict() for row in rows], "commands": commands,
                "machine": record_format.host_info()}
    write_json_atomic(out / "matrix.json", json.loads(json.dumps(document, default=str)))
    write_atomic(out / "matrix.md", matrix_markdown(rows, base))


def main(ns: argparse.Namespace) -> int:
    analysis_settings(ns)  # the analysis options checked before anything launches
    load_workload(ns.workload)  # a plug-in that cannot be loaded is one line, before any launch
    if ns.steps < 2 * MIN_OVERLAP:
        raise UsageError(f"--steps must be at least {2 * MIN_OVERLAP} (the resume row stops half-way, and a "
                         f"verdict needs {MIN_OVERLAP} common steps)")
    return run_matrix(ns)
