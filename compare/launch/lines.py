"""The launcher lines of local launches, built in one place (Slurm's and Kubernetes' own: slurm.py, k8s.py).

horovodrun (--mpi / --gloo, fixed hosts or elastic), torchrun (standalone, restarts), the Python spawn
launchers, the single-process reference, a benchmarks/ module under any of them, the loopback-only
network namespace, and the thread variables both sides get. `compare run`, `bench`, `faults`, `matrix` and
scripts/soak.py all build their launches here, so a launch line cannot drift between commands.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from compare.names import MODULES
from workload.options import Options, to_argv
from workload.record_format import LAUNCH_LOG

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Launch:
    """One launcher invocation: a framework at a world size, running every seed in turn."""

    framework: str  # "horovod" | "ddp" | "reference" | a benchmark's name
    world_size: int
    seeds: tuple[int, ...]
    command: list[str]
    env: dict[str, str]
    run_root: Path  # the --out given to the implementation; seeds write run_root/seed-S
    log_path: Path
    # The evidence, read from the log, that every rank finished its work, for a launch whose ranks write no run
    # record (a user's script under `compare migrate --verify`); None: every seed's record says "ok".
    finished_per_log: Callable[[str], bool] | None = None

    @property
    def label(self) -> str:
        return launch_label(self.framework, self.world_size)

    def shell_line(self) -> str:
        variables = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        return f"{variables} {shlex.join(self.command)}".strip()


@dataclass(frozen=True)
class Program:
    """What every rank runs, as `python`'s arguments: a module (`-m hvd_impl`) or a user's script, then its own
    arguments. Each launcher line puts it after `python` (horovodrun, srun, mpirun) or after torchrun's options."""

    target: tuple[str, ...]  # ("-m", "hvd_impl") or ("path/to/train.py",)
    args: tuple[str, ...] = ()

    @property
    def words(self) -> list[str]:
        return [*self.target, *self.args]


def implementation_program(framework: str, world_size: int, argv: list[str]) -> Program:
    """An implementation of this project with its own arguments (the reference emulates the world size)."""
    if framework == "reference":
        return Program(("-m", MODULES[framework], "--emulate-world-size", str(world_size)), tuple(argv))
    return Program(("-m", MODULES[framework]), tuple(argv))


def launch_label(framework: str, world_size: int) -> str:
    """How progress lines and reports name a launch, local or Slurm alike: "ddp np2"."""
    return f"{framework} np{world_size}"


def executable(name: str) -> str:
    """Prefer the launcher installed beside this Python (the project's virtual environment)."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else (shutil.which(name) or name)


def thread_env(threads: int) -> dict[str, str]:
    """The thread variables of every launch, local, Slurm (slurm.py) and Kubernetes (k8s.py) alike:
    torchrun sets OMP_NUM_THREADS=1, horovodrun, mpirun and srun set nothing, so each side is given the count."""
    return {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1"}


# torchrun's rendezvous store and Horovod's driver bind every interface, whatever address they are
# given; inside a network namespace whose only interface is loopback, every interface is loopback.
PRIVATE_NETWORK = ["unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "private-network"]


@functools.cache
def private_network_available() -> bool:
    """Whether a launch can run in a network namespace of its own (root, unshare and ip are needed)."""
    if not (shutil.which("unshare") and shutil.which("ip")):
        return False
    try:
        return subprocess.run([*PRIVATE_NETWORK, "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def horovodrun(world_size: int, controller: str, program: list[str], *, elastic: list[str] | None = None) -> list[str]:
    """horovodrun on this host, Horovod's own traffic on loopback; `elastic` replaces the fixed host list."""
    hosts = elastic if elastic is not None else ["-H", f"localhost:{world_size}"]
    return [executable("horovodrun"), "-np", str(world_size), *hosts, f"--{controller}",
            "--network-interfaces", "lo", *program]


def torchrun(world_size: int, program: list[str], *, max_restarts: int = 0) -> list[str]:
    """torchrun --standalone: a c10d rendezvous on localhost with a free port (gloo on loopback: see env)."""
    restarts = ["--max-restarts", str(max_restarts)] if max_restarts else []
    return [executable("torchrun"), "--standalone", "--nproc-per-node", str(world_size), *restarts, *program]


def python_module(module: str, args: list[str]) -> list[str]:
    return [sys.executable, "-m", module, *args]


def launcher_command(launcher: str, world_size: int, program: list[str]) -> list[str]:
    """`program` (a Python command) under a launcher named as bench names them."""
    if launcher == "torchrun":
        return torchrun(world_size, program)
    if launcher.startswith("horovodrun-"):
        return horovodrun(world_size, launcher.removeprefix("horovodrun-"), [sys.executable, *program])
    if launcher == "python":
        return [sys.executable, *program]
    raise ValueError(f"unknown launcher {launcher!r}")


def implementation_command(framework: str, world_size: int, argv: list[str], *, launcher: str = "cli",
                           horovod_controller: str = "mpi") -> list[str]:
    """The command that trains `framework` at `world_size` with the implementation's own arguments."""
    module = MODULES[framework]
    if framework == "reference":
        return python_module(module, ["--emulate-world-size", str(world_size), *argv])
    if launcher == "spawn":
        controller = ["--spawn-controller", horovod_controller] if framework == "horovod" else []
        return python_module(module, ["--spawn", str(world_size), *controller, *argv])
    if framework == "horovod":
        return horovodrun(world_size, horovod_controller, python_module(module, argv))
    return torchrun(world_size, ["-m", module, *argv])


def launch_env(framework: str, threads: int, extra_env: dict[str, str] | None = None) -> dict[str, str]:
    env = thread_env(threads)
    if framework == "ddp":
        env["GLOO_SOCKET_IFNAME"] = "lo"  # torchrun --standalone: keep gloo's own sockets on loopback too
    return {**env, **(extra_env or {})}


def build_launch(framework: str, world_size: int, options: Options, run_root: Path, *,
                 horovod_controller: str = "mpi", launcher: str = "cli",
                 extra_env: dict[str, str] | None = None, private_network: bool = False) -> Launch:
    """launcher "cli" uses horovodrun / torchrun; "spawn" starts the workers from Python
    (horovod.run / torch.multiprocessing.spawn). private_network: inside a loopback-only namespace."""
    argv = to_argv(options, out=run_root, seeds=options.seeds)
    command = implementation_command(framework, world_size, argv, launcher=launcher,
                                     horovod_controller=horovod_controller)
    if private_network:
        command = [*PRIVATE_NETWORK, *command]
    return Launch(framework, world_size, options.seeds, command, launch_env(framework, options.threads, extra_env),
                  run_root, run_root / LAUNCH_LOG)


def benchmark_launch(name: str, module: str, args: list[str], world_size: int, launcher: str, out: Path,
                     threads: int) -> Launch:
    """A benchmarks/ module under the same launcher lines as the implementations (benchmarks/ importable)."""
    program = ["-m", module, *args]
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**thread_env(threads), "GLOO_SOCKET_IFNAME": "lo", "PYTHONPATH": path}
    return Launch(name, world_size, (0,), launcher_command(launcher, world_size, program), env, out,
                  out / LAUNCH_LOG)


def recovery_launch(framework: str, options: Options, out: Path, *, faulty: bool) -> Launch:
    """`compare faults` and the soak script at np 2: the uninterrupted run, or the one set up to recover
    from a fault (torchrun --max-restarts with --auto-resume; elastic Horovod on Gloo)."""
    argv = to_argv(options, out=out, seeds=options.seeds)
    if framework == "ddp":
        command = torchrun(2, ["-m", MODULES["ddp"], *argv, "--auto-resume"], max_restarts=3 if faulty else 0)
    else:
        elastic = (["--min-np", "1", "--max-np", "2", "--host-discovery-script",
                    str(ROOT / "scripts" / "horovod-local-hosts.sh"), "--blacklist-cooldown-range", "2", "4"]
                   if faulty else None)
        command = horovodrun(2, "gloo", python_module(MODULES["horovod"], [*argv, *(["--elastic"] if faulty else [])]),
                             elastic=elastic)
    return Launch(framework, 2, options.seeds, command, launch_env(framework, options.threads), out,
                  out / LAUNCH_LOG)
