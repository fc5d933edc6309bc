"""python -m compare k8s: the manifests parse, carry each kind's documented fields, and say what a schema
cannot check: process counts against slots and GPUs, the rendezvous, the same training options on both
sides, and the image's own entry point."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from compare.launch import k8s
from workload.errors import UsageError
from workload.options import Options

ROOT = Path(__file__).resolve().parents[1]
TRAINING = ["--workload", "mlp", "--steps", "30", "--seeds", "0,1", "--lr", "0.05", "--threads", "2",
            "--compression", "fp16", "--log-every", "1"]


def make(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """The command as a user runs it."""
    return subprocess.run([sys.executable, "-m", "compare", "k8s", *args, "-o", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def make_here(capsys, tmp_path: Path, *args: str) -> tuple[int, str, str]:
    """The same in this process (each new Python pays for importing torch)."""
    from compare.__main__ import main

    code = main(["k8s", *args, "-o", str(tmp_path)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def gpu_docs(tmp_path_factory) -> dict[str, list[dict]]:
    """Three pods of four GPUs, with options that differ from every default."""
    out = tmp_path_factory.mktemp("k8s")
    result = make(out, "--image", "registry.example/hvd-compare:1", "--workers", "3", "--gpus-per-worker", "4",
                  "--device", "cuda", *TRAINING)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(k8s.FILES.values())
    return {name: list(yaml.safe_load_all((out / name).read_text())) for name in k8s.FILES.values()}


def by_kind(docs: dict[str, list[dict]], kind: str) -> dict:
    found = [doc for documents in docs.values() for doc in documents if doc["kind"] == kind]
    assert len(found) == 1, kind
    return found[0]


def containers(spec: dict) -> list[dict]:
    return spec["template"]["spec"]["containers"]


def program_args(args: list[str], program: str) -> list[str]:
    """The implementation's own arguments, after `python -m hvd_impl` or `-m native_impl`."""
    return args[args.index(program) + 1:]


def test_documented_fields(gpu_docs):
    mpijob = by_kind(gpu_docs, "MPIJob")
    assert mpijob["apiVersion"] == "kubeflow.org/v2beta1"
    assert set(mpijob["spec"]["mpiReplicaSpecs"]) == {"Launcher", "Worker"}
    assert mpijob["spec"]["mpiImplementation"] == "OpenMPI"
    assert mpijob["spec"]["runPolicy"]["cleanPodPolicy"] in ("None", "Running", "All")
    pytorchjob = by_kind(gpu_docs, "PyTorchJob")
    assert pytorchjob["apiVersion"] == "kubeflow.org/v1"
    assert set(pytorchjob["spec"]["pytorchReplicaSpecs"]) == {"Master", "Worker"}
    for spec in pytorchjob["spec"]["pytorchReplicaSpecs"].values():
        # The Training Operator finds the training container by its name.
        assert [c["name"] for c in containers(spec)] == ["pytorch"]
        assert spec["restartPolicy"] in ("Always", "OnFailure", "Never", "ExitCode")
    trainjob = by_kind(gpu_docs, "TrainJob")
    assert trainjob["apiVersion"] == "trainer.kubeflow.org/v1alpha1"
    assert trainjob["spec"]["runtimeRef"]["name"] == "torch-distributed"
    assert set(trainjob["spec"]["trainer"]) <= {"image", "command", "args", "env", "numNodes", "resourcesPerNode",
                                               "numProcPerNode"}
    override = trainjob["spec"]["podSpecOverrides"][0]
    assert override["targetJobs"] == [{"name": "node"}]  # the runtime's job and container are "node"
    assert [c["name"] for c in override["containers"]] == ["node"]
    for doc in (mpijob, pytorchjob, trainjob):
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", doc["metadata"]["name"])


def test_process_counts_match_slots_and_gpus(gpu_docs):
    mpijob = by_kind(gpu_docs, "MPIJob")["spec"]
    workers = mpijob["mpiReplicaSpecs"]["Worker"]
    assert workers["replicas"] == 3 and mpijob["slotsPerWorker"] == 4
    launcher_args = containers(mpijob["mpiReplicaSpecs"]["Launcher"])[0]["args"]
    assert launcher_args[:3] == ["mpirun", "-np", "12"]  # 3 workers x 4 slots
    assert containers(workers)[0]["resources"]["limits"]["nvidia.com/gpu"] == 4
    assert "nvidia.com/gpu" not in json.dumps(mpijob["mpiReplicaSpecs"]["Launcher"])  # mpirun needs none
    pytorchjob = by_kind(gpu_docs, "PyTorchJob")["spec"]
    replicas = pytorchjob["pytorchReplicaSpecs"]
    assert replicas["Master"]["replicas"] + replicas["Worker"]["replicas"] == 3
    assert pytorchjob["nprocPerNode"] == "4"
    for spec in replicas.values():
        assert containers(spec)[0]["resources"]["limits"]["nvidia.com/gpu"] == 4
    trainer = by_kind(gpu_docs, "TrainJob")["spec"]["trainer"]
    assert (trainer["numNodes"], trainer["numProcPerNode"]) == (3, 4)
    assert trainer["resourcesPerNode"]["limits"]["nvidia.com/gpu"] == 4


def test_rendezvous(gpu_docs):
    # Horovod: mpirun reaches the workers over ssh on the port the workers' sshd listens on.
    mpijob = by_kind(gpu_docs, "MPIJob")
    config = by_kind(gpu_docs, "ConfigMap")
    launcher_args = containers(mpijob["spec"]["mpiReplicaSpecs"]["Launcher"])[0]["args"]
    rsh = launcher_args[launcher_args.index("plm_rsh_args") + 1]
    port = re.search(r"^Port (\d+)$", config["data"]["sshd_config"], re.M).group(1)
    assert f"-p {port}" in rsh
    worker = containers(mpijob["spec"]["mpiReplicaSpecs"]["Worker"])[0]
    assert worker["args"][:2] == ["/usr/sbin/sshd", "-De"]
    mount = next(m["mountPath"] for m in worker["volumeMounts"] if m["name"] == "sshd-config")
    assert worker["args"][-1] == f"{mount}/sshd_config"
    assert config["metadata"]["name"] in json.dumps(mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["template"])
    key_dir = mpijob["spec"]["sshAuthMountPath"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    user = re.search(r"useradd .*--uid \"\$USER_UID\" .* (\w+)(?: \\)?$", dockerfile, re.M).group(1)
    assert key_dir == f"/home/{user}/.ssh"  # the image user's home: sshd and mpirun run as that user
    assert f"HostKey {key_dir}/" in config["data"]["sshd_config"]
    # DDP: torchrun takes node count, rank, processes per node and the master's address from the operator
    # (PET_*); a flag in the manifest would override them.
    pytorchjob = by_kind(gpu_docs, "PyTorchJob")["spec"]["pytorchReplicaSpecs"]
    trainjob = by_kind(gpu_docs, "TrainJob")["spec"]["trainer"]
    for args in [containers(spec)[0]["args"] for spec in pytorchjob.values()] + [trainjob["args"]]:
        assert args[0] == "torchrun"
        launcher_flags = args[:args.index("-m")]
        assert not [flag for flag in launcher_flags if flag.startswith(("--nnodes", "--nproc", "--node-rank",
                                                                        "--master", "--rdzv", "--standalone"))]
    master_ports = containers(pytorchjob["Master"])[0]["ports"]
    assert {"name": "pytorchjob-port", "containerPort": 23456} in master_ports


def test_identical_training_options(gpu_docs):
    mpijob = by_kind(gpu_docs, "MPIJob")
    horovod = program_args(containers(mpijob["spec"]["mpiReplicaSpecs"]["Launcher"])[0]["args"], "hvd_impl")
    pytorchjob = by_kind(gpu_docs, "PyTorchJob")["spec"]["pytorchReplicaSpecs"]
    ddp = [program_args(containers(spec)[0]["args"], "native_impl") for spec in pytorchjob.values()]
    ddp.append(program_args(by_kind(gpu_docs, "TrainJob")["spec"]["trainer"]["args"], "native_impl"))

    def without_out(args: list[str]) -> list[str]:
        i = args.index("--out")
        return args[:i] + args[i + 2:]

    for args in ddp:
        assert without_out(args) == without_out(horovod)
        assert args[args.index("--out") + 1] == "/results/runs/ddp"
    assert horovod[horovod.index("--out") + 1] == "/results/runs/horovod"
    # What was asked for is what runs (and parses back to the same options on each side).
    for flag, value in (("--steps", "30"), ("--seeds", "0,1"), ("--lr", "0.05"), ("--threads", "2"),
                        ("--compression", "fp16"), ("--device", "cuda")):
        assert horovod[horovod.index(flag) + 1] == value
    # Threads: the same variables on every training container (mpirun exports them to the ranks).
    envs = [containers(mpijob["spec"]["mpiReplicaSpecs"]["Launcher"])[0]["env"],
            *[containers(spec)[0]["env"] for spec in pytorchjob.values()],
            by_kind(gpu_docs, "TrainJob")["spec"]["trainer"]["env"]]
    for env in envs:
        assert {"name": "OMP_NUM_THREADS", "value": "2"} in env
    launcher_args = containers(mpijob["spec"]["mpiReplicaSpecs"]["Launcher"])[0]["args"]
    assert launcher_args[launcher_args.index("OMP_NUM_THREADS") - 1] == "-x"


def test_results_volume_on_every_training_pod(gpu_docs):
    claim = by_kind(gpu_docs, "PersistentVolumeClaim")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]  # pods on several nodes write to it
    name = claim["metadata"]["name"]
    mpijob = by_kind(gpu_docs, "MPIJob")["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    pytorchjob = by_kind(gpu_docs, "PyTorchJob")["spec"]["pytorchReplicaSpecs"]
    override = by_kind(gpu_docs, "TrainJob")["spec"]["podSpecOverrides"][0]
    pod = by_kind(gpu_docs, "Pod")["spec"]
    specs = [mpijob, *[spec["template"]["spec"] for spec in pytorchjob.values()], override, pod]
    # The image runs as its own user: the pods give the volume that user's group, so that it may write.
    uid = int(re.search(r"^ARG USER_UID=(\d+)$", (ROOT / "Dockerfile").read_text(), re.M).group(1))
    for spec in [mpijob, *[spec["template"]["spec"] for spec in pytorchjob.values()], pod]:
        assert spec["securityContext"]["fsGroup"] == uid
    for spec in specs:
        volume = next(v for v in spec["volumes"] if v.get("persistentVolumeClaim"))
        assert volume["persistentVolumeClaim"]["claimName"] == name
        mounts = [m for c in spec["containers"] for m in c["volumeMounts"] if m["name"] == volume["name"]]
        assert [m["mountPath"] for m in mounts] == ["/results"]


def test_image_entry_point_kept(gpu_docs):
    # Kubernetes' `command` replaces the image's ENTRYPOINT: every container names the Dockerfile's own,
    # and hands it a program (not options, which hvd-entrypoint would turn into `compare run`).
    dockerfile = (ROOT / "Dockerfile").read_text()
    entrypoint = json.loads(re.search(r"^ENTRYPOINT (\[.*\])$", dockerfile, re.M).group(1))
    copied = re.search(r"^COPY docker/entrypoint\.sh (\S+)$", dockerfile, re.M).group(1)
    assert entrypoint[-1] == copied
    assert "exec \"$@\"" in (ROOT / "docker" / "entrypoint.sh").read_text()
    specs = [spec for documents in gpu_docs.values() for doc in documents for spec in _container_specs(doc)]
    assert len(specs) == 6  # launcher, worker, master, worker, trainer, results pod
    for spec in specs:
        assert spec["image"] == "registry.example/hvd-compare:1"
        assert spec["command"] == entrypoint
        assert not spec["args"][0].startswith("-")


def _container_specs(doc: dict) -> list[dict]:
    out = []

    def walk(node):
        if isinstance(node, dict):
            if "image" in node and ("args" in node or "command" in node):
                out.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(doc)
    return out


def test_cpu_workers(tmp_path, capsys):
    code, out, err = make_here(capsys, tmp_path, "--image", "hvd-compare", "--workers", "2", "--procs-per-worker",
                               "2", "--steps", "5")
    assert code == 0, err
    docs = {p.name: list(yaml.safe_load_all(p.read_text())) for p in tmp_path.glob("*.yaml")}
    mpijob = by_kind(docs, "MPIJob")["spec"]
    assert mpijob["slotsPerWorker"] == 2
    assert containers(mpijob["mpiReplicaSpecs"]["Launcher"])[0]["args"][:3] == ["mpirun", "-np", "4"]
    assert "nvidia.com/gpu" not in json.dumps(docs)
    worker = containers(mpijob["mpiReplicaSpecs"]["Worker"])[0]
    assert worker["resources"]["limits"]["cpu"] == "2"  # processes x threads
    assert "world size 4" in out


def test_one_worker_has_no_worker_replicas():
    job = k8s.pytorchjob(k8s.Cluster(image="i", workers=1), Options())
    assert set(job["spec"]["pytorchReplicaSpecs"]) == {"Master"}


@pytest.mark.parametrize(("args", "message"), [
    (["--workers", "0"], "--workers"),
    (["--workers", "2", "--gpus-per-worker", "2", "--procs-per-worker", "3", "--device", "cuda"],
     "one process per GPU"),
    (["--workers", "2", "--gpus-per-worker", "2"], "needs --device cuda"),
    (["--workers", "2", "--device", "cuda"], "needs --gpus-per-worker"),
    (["--workers", "2", "--name", "Bad_Name"], "DNS label"),
    (["--workers", "2", "--steps", "0"], "--steps"),
])
def test_bad_input_one_line_nothing_written(tmp_path, capsys, args, message):
    code, _, err = make_here(capsys, tmp_path / "out", "--image", "img", *args)
    assert code == 2
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_check_raises_usage_error():
    with pytest.raises(UsageError, match="--image"):
        k8s.check(k8s.Cluster(image=" ", workers=1), Options())
