"""python -m compare k8s: Kubeflow manifests for both sides from one set of options (docs/kubernetes.md)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from compare.names import Exit


def main(ns: argparse.Namespace) -> int:
    from compare.launch import k8s
    from workload.options import options_from_namespace, validate

    options = options_from_namespace(ns)
    # What depends on this machine is not checked here: the job runs in the cluster's pods (their GPUs,
    # their paths for --resume and --text-dir).
    validate(replace(options, device="cpu", sync_bn=options.sync_bn and options.device != "cuda", resume=None,
                     text_dir=None))
    procs = ns.procs_per_worker if ns.procs_per_worker is not None else max(1, ns.gpus_per_worker)
    cluster = k8s.Cluster(image=ns.image, workers=ns.workers, gpus_per_worker=ns.gpus_per_worker,
                          procs_per_worker=procs, name=ns.name, results_claim=ns.results_claim,
                          results_size=ns.results_size, storage_class=ns.storage_class,
                          trainjob_runtime=ns.trainjob_runtime)
    files = k8s.manifests(cluster, options)  # raises UsageError before anything is written
    argv = sys.argv[sys.argv.index("k8s") + 1:] if "k8s" in sys.argv else []
    for path in k8s.write_manifests(ns.out, files, k8s.command_line(argv)):
        print(path)
    print(f"{cluster.workers} pods x {cluster.procs_per_worker} processes = world size {cluster.world_size} "
          "on each side; results in /results/runs/horovod and /results/runs/ddp")
    return Exit.OK
