"""Kubernetes manifests for both sides of the comparison, from one set of options (docs/kubernetes.md).

Horovod runs as Kubeflow's MPIJob (kubeflow.org/v2beta1, the MPI Operator): a launcher pod runs
`mpirun`, which starts the ranks on the worker pods over ssh. DDP runs as Kubeflow's PyTorchJob
(kubeflow.org/v1, the Training Operator) and as a TrainJob (trainer.kubeflow.org/v1alpha1, Kubeflow
Trainer, with its `torch-distributed` runtime): one `torchrun` per pod, whose node count, node rank,
processes per node and rendezvous address the operator passes in its PET_* variables. Every training
pod mounts one results volume (a ReadWriteMany PersistentVolumeClaim) at /results; each side writes its
run records to /results/runs/<framework>, which `compare check` then compares.

Pure functions: dictionaries in, dictionaries out; `write_manifests` writes them.
"""

from __future__ import annotations

import os
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import PurePosixPath

import yaml

from compare.launch.lines import thread_env
from workload.errors import UsageError
from workload.options import Options, to_argv

RESULTS_MOUNT = "/results"
RESULTS_VOLUME = "results"
# The image's entry point (Dockerfile ENTRYPOINT): tini reaps orphans, hvd-entrypoint fixes HOME and runs
# the command it is given. Setting `command` to it keeps it when Kubernetes would otherwise replace it.
ENTRYPOINT = ["/usr/bin/tini", "--", "/usr/local/bin/hvd-entrypoint"]
MPI_SSH_PORT = 2222  # the image runs as a user without root: its sshd cannot listen on 22
SSHD_CONFIG_MOUNT = "/etc/hvd-compare"
IMAGE_UID = 1000  # the image's user (Dockerfile USER_UID): fsGroup makes the results volume writable for it
POD_SECURITY = {"fsGroup": IMAGE_UID}
PYTORCHJOB_PORT = 23456  # the Training Operator's default; declared so that the master service exposes it
GPU_RESOURCE = "nvidia.com/gpu"
FILES = {"mpijob": "horovod-mpijob.yaml", "pytorchjob": "ddp-pytorchjob.yaml", "trainjob": "ddp-trainjob.yaml",
         "results": "results.yaml"}


@dataclass(frozen=True)
class Cluster:
    """Where and how big: the same for both sides."""

    image: str
    workers: int
    gpus_per_worker: int = 0
    procs_per_worker: int = 1
    name: str = "hvd-compare"
    results_claim: str = "hvd-compare-results"
    results_size: str = "1Gi"
    storage_class: str | None = None
    trainjob_runtime: str = "torch-distributed"

    @property
    def world_size(self) -> int:
        return self.workers * self.procs_per_worker


def check(cluster: Cluster, options: Options) -> None:
    """One line for each input a cluster would reject or run wrongly."""
    if not cluster.image.strip():
        raise UsageError("--image must name a container image")
    if cluster.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {cluster.workers}")
    if cluster.procs_per_worker < 1:
        raise UsageError(f"--procs-per-worker must be at least 1, got {cluster.procs_per_worker}")
    if cluster.gpus_per_worker < 0:
        raise UsageError(f"--gpus-per-worker must not be negative, got {cluster.gpus_per_worker}")
    if cluster.gpus_per_worker and cluster.gpus_per_worker != cluster.procs_per_worker:
        raise UsageError(f"one process per GPU: --procs-per-worker {cluster.procs_per_worker} with "
                         f"--gpus-per-worker {cluster.gpus_per_worker}")
    if cluster.gpus_per_worker and options.device != "cuda":
        raise UsageError("--gpus-per-worker needs --device cuda (the processes would not use the GPUs)")
    if options.device == "cuda" and not cluster.gpus_per_worker:
        raise UsageError("--device cuda needs --gpus-per-worker (the pods would get no GPU)")
    for label, value in (("--name", cluster.name), ("--results-claim", cluster.results_claim)):
        if not value or not all((c.isalnum() and c.islower()) or c.isdigit() or c == "-" for c in value) \
                or value.startswith("-") or value.endswith("-") or len(value) > 40:
            raise UsageError(f"{label} must be a DNS label (lower-case letters, digits, '-'), got {value!r}")


def training_args(options: Options, framework: str) -> list[str]:
    """The implementation's arguments: identical on both sides but for the run directory."""
    return to_argv(options, out=PurePosixPath(RESULTS_MOUNT) / "runs" / framework, seeds=options.seeds)  # type: ignore[arg-type]


def container_env(options: Options) -> list[dict]:
    """The launch's thread variables (lines.thread_env) as a container's name/value pairs."""
    return [{"name": name, "value": value} for name, value in thread_env(options.threads).items()]


def _resources(cluster: Cluster, options: Options) -> dict:
    cpus = str(cluster.procs_per_worker * options.threads)
    resources: dict = {"requests": {"cpu": cpus}, "limits": {"cpu": cpus}}
    if cluster.gpus_per_worker:
        resources["limits"][GPU_RESOURCE] = cluster.gpus_per_worker
    return resources


def _results_volume(cluster: Cluster) -> dict:
    return {"name": RESULTS_VOLUME, "persistentVolumeClaim": {"claimName": cluster.results_claim}}


def _results_mount() -> dict:
    return {"name": RESULTS_VOLUME, "mountPath": RESULTS_MOUNT}


def mpijob(cluster: Cluster, options: Options) -> list[dict]:
    """Horovod as an MPIJob: mpirun on the launcher, procs_per_worker slots on each worker.

    Returns the MPIJob and the ConfigMap with the workers' sshd configuration (the operator mounts the
    ssh keys; sshd runs as the image's user, on port 2222)."""
    name = f"{cluster.name}-horovod"
    sshd_map = f"{name}-sshd"
    mpirun = ["mpirun", "-np", str(cluster.world_size), "--bind-to", "none", "--map-by", "slot",
              "-mca", "plm_rsh_args", f"-p {MPI_SSH_PORT} -o ConnectionAttempts=10",
              *(word for name in thread_env(options.threads) for word in ("-x", name)),  # to every rank
              "python", "-m", "hvd_impl", *training_args(options, "horovod")]
    ssh_dir = "/home/hvd/.ssh"
    sshd_config = (f"Port {MPI_SSH_PORT}\nHostKey {ssh_dir}/id_rsa\nAuthorizedKeysFile {ssh_dir}/authorized_keys\n"
                   "PidFile /tmp/sshd.pid\nStrictModes no\nPasswordAuthentication no\nUsePAM no\n")
    config_map = {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": sshd_map},
        "data": {"sshd_config": sshd_config},
    }
    launcher = {
        "name": "mpi-launcher", "image": cluster.image, "command": ENTRYPOINT, "args": mpirun,
        "env": container_env(options),
        "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}},
    }
    worker = {
        "name": "mpi-worker", "image": cluster.image, "command": ENTRYPOINT,
        "args": ["/usr/sbin/sshd", "-De", "-f", f"{SSHD_CONFIG_MOUNT}/sshd_config"],
        "env": container_env(options),
        "resources": _resources(cluster, options),
        "volumeMounts": [_results_mount(), {"name": "sshd-config", "mountPath": SSHD_CONFIG_MOUNT}],
    }
    job = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": cluster.name}},
        "spec": {
            "slotsPerWorker": cluster.procs_per_worker,
            "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 0},
            "mpiImplementation": "OpenMPI",
            "sshAuthMountPath": ssh_dir,
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "restartPolicy": "Never",
                             "template": {"spec": {"securityContext": POD_SECURITY, "containers": [launcher]}}},
                "Worker": {"replicas": cluster.workers, "restartPolicy": "Never",
                           "template": {"spec": {
                               "securityContext": POD_SECURITY,
                               "containers": [worker],
                               "volumes": [_results_volume(cluster),
                                           {"name": "sshd-config", "configMap": {"name": sshd_map}}]}}},
            },
        },
    }
    return [config_map, job]


def torchrun_args(options: Options) -> list[str]:
    """torchrun with nothing of the cluster in it: node count, node rank, processes per node and the
    rendezvous address come from the operator's PET_* variables (PET_NNODES, PET_NODE_RANK,
    PET_NPROC_PER_NODE, PET_MASTER_ADDR, PET_MASTER_PORT), which torchrun reads as its defaults."""
    return ["torchrun", "-m", "native_impl", *training_args(options, "ddp")]


def _ddp_container(cluster: Cluster, options: Options) -> dict:
    return {"name": "pytorch", "image": cluster.image, "command": ENTRYPOINT, "args": torchrun_args(options),
            "env": container_env(options), "resources": _resources(cluster, options),
            "volumeMounts": [_results_mount()]}


def pytorchjob(cluster: Cluster, options: Options) -> dict:
    """DDP as a PyTorchJob: a Master and workers-1 Workers, each pod one torchrun of procs_per_worker ranks."""
    master_container = {**_ddp_container(cluster, options),
                        "ports": [{"name": "pytorchjob-port", "containerPort": PYTORCHJOB_PORT}]}
    replica_specs: dict = {
        "Master": {"replicas": 1, "restartPolicy": "Never",
                   "template": {"spec": {"securityContext": POD_SECURITY, "containers": [master_container],
                                         "volumes": [_results_volume(cluster)]}}},
    }
    if cluster.workers > 1:
        replica_specs["Worker"] = {
            "replicas": cluster.workers - 1, "restartPolicy": "Never",
            "template": {"spec": {"securityContext": POD_SECURITY, "containers": [_ddp_container(cluster, options)],
                                  "volumes": [_results_volume(cluster)]}}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": f"{cluster.name}-ddp", "labels": {"app.kubernetes.io/part-of": cluster.name}},
        "spec": {
            "nprocPerNode": str(cluster.procs_per_worker),
            "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 0},
            "pytorchReplicaSpecs": replica_specs,
        },
    }


def trainjob(cluster: Cluster, options: Options) -> dict:
    """DDP as a TrainJob on the torch-distributed runtime: numNodes pods of numProcPerNode ranks."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": f"{cluster.name}-ddp-trainjob", "labels": {"app.kubernetes.io/part-of": cluster.name}},
        "spec": {
            "runtimeRef": {"name": cluster.trainjob_runtime, "apiGroup": "trainer.kubeflow.org",
                           "kind": "ClusterTrainingRuntime"},
            "trainer": {
                "image": cluster.image,
                "command": ENTRYPOINT,
                "args": torchrun_args(options),
                "env": container_env(options),
                "numNodes": cluster.workers,
                "numProcPerNode": cluster.procs_per_worker,
                "resourcesPerNode": _resources(cluster, options),
            },
            # The runtime's training job and container are both named "node".
            "podSpecOverrides": [{
                "targetJobs": [{"name": "node"}],
                "volumes": [_results_volume(cluster)],
                "containers": [{"name": "node", "volumeMounts": [_results_mount()]}],
            }],
        },
    }


def results(cluster: Cluster) -> list[dict]:
    """The results claim, and a pod that mounts it for `kubectl cp` once the jobs are done."""
    claim: dict = {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": cluster.results_claim},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": cluster.results_size}}},
    }
    if cluster.storage_class:
        claim["spec"]["storageClassName"] = cluster.storage_class
    reader = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{cluster.name}-results"},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": POD_SECURITY,
            "containers": [{"name": "results", "image": cluster.image, "command": ENTRYPOINT,
                            "args": ["sleep", "3600"], "volumeMounts": [_results_mount()]}],
            "volumes": [_results_volume(cluster)],
        },
    }
    return [claim, reader]


def manifests(cluster: Cluster, options: Options) -> dict[str, list[dict]]:
    """File name: the documents it holds."""
    check(cluster, options)
    return {FILES["results"]: results(cluster), FILES["mpijob"]: mpijob(cluster, options),
            FILES["pytorchjob"]: [pytorchjob(cluster, options)], FILES["trainjob"]: [trainjob(cluster, options)]}


class _Dumper(yaml.SafeDumper):
    """Plain YAML for people: no anchors for repeated values, multi-line text as a literal block."""

    def ignore_aliases(self, data: object) -> bool:
        return True


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _text)


def render(documents: list[dict], command_line: str) -> str:
    header = f"# Written by: {command_line}\n# docs/kubernetes.md tells how to run it.\n"
    return header + yaml.dump_all(documents, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120)


def write_manifests(directory: os.PathLike, files: dict[str, list[dict]], command_line: str) -> list[str]:
    """Each file written whole or not at all (a temporary file renamed)."""
    os.makedirs(directory, exist_ok=True)
    written = []
    for name, documents in files.items():
        path = os.path.join(directory, name)
        handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{name}.")
        try:
            with os.fdopen(handle, "w") as out:
                out.write(render(documents, command_line))
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
        written.append(path)
    return written


def command_line(argv: list[str]) -> str:
    return shlex.join(["python", "-m", "compare", "k8s", *argv])
