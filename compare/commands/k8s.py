"""python -m compare k8s: Kubeflow manifests for both sides from one set of options (docs/kubernetes.md)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path


def add_parser(commands) -> None:
    from workload.options import add_arguments

    parser = commands.add_parser(
        "k8s", help="write Kubeflow manifests for both sides (MPIJob, PyTorchJob, TrainJob)",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description="Write an MPIJob (Horovod through mpirun), a PyTorchJob and a TrainJob (DDP through torchrun) "
                    "that train the same job with the same options, a results volume claim and a pod to read it. "
                    "Nothing is applied: `kubectl apply -f DIR/...` does that (docs/kubernetes.md).")
    cluster = parser.add_argument_group("cluster")
    cluster.add_argument("--image", required=True, help="the project's image (Dockerfile), pushed where the cluster "
                                                        "pulls from")
    cluster.add_argument("--workers", type=int, required=True, help="pods per job")
    cluster.add_argument("--gpus-per-worker", type=int, default=0, help="GPUs each pod asks for (with --device cuda)")
    cluster.add_argument("--procs-per-worker", type=int, default=None,
                         help="training processes per pod (default: --gpus-per-worker, or 1 without GPUs)")
    cluster.add_argument("--name", default="hvd-compare", help="prefix of the jobs' names")
    cluster.add_argument("--results-claim", default="hvd-compare-results",
                         help="the PersistentVolumeClaim (ReadWriteMany) every training pod mounts at /results")
    cluster.add_argument("--results-size", default="1Gi", help="its requested size")
    cluster.add_argument("--storage-class", default=None, help="its storage class (default: the cluster's)")
    cluster.add_argument("--trainjob-runtime", default="torch-distributed",
                         help="the ClusterTrainingRuntime the TrainJob runs on")
    cluster.add_argument("-o", "--output-dir", type=Path, default=Path("k8s"), help="where the manifests go")
    add_arguments(parser, run_directory=False, launch=False)
    parser.set_defaults(func=main)


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
    for path in k8s.write_manifests(ns.output_dir, files, k8s.command_line(argv)):
        print(path)
    print(f"{cluster.workers} pods x {cluster.procs_per_worker} processes = world size {cluster.world_size} "
          "on each side; results in /results/runs/horovod and /results/runs/ddp")
    return 0
