"""A horovodrun command line -> the torchrun command line for each node."""

from __future__ import annotations

import dataclasses
import shlex

from workload.errors import UsageError

RDZV_PORT = 29400  # torchrun's c10d rendezvous default port
# horovodrun options that take a value, and those that do not (the rest of the line is the training command)
VALUE_OPTIONS = {"-np", "-n", "--num-proc", "-H", "--hosts", "-hostfile", "--hostfile", "-p", "--ssh-port",
                 "-i", "--ssh-identity-file", "--network-interfaces", "--fusion-threshold-mb", "--cycle-time-ms",
                 "--cache-capacity", "--timeline-filename", "--log-level", "--start-timeout", "--output-filename",
                 "--min-np", "--max-np", "--host-discovery-script", "--slots", "--mpi-args", "--config-file",
                 "--gloo-timeout-seconds", "--reset-limit", "--blacklist-cooldown-range"}
FLAG_OPTIONS = {"--gloo", "--mpi", "--jsrun", "--verbose", "--disable-cache", "--check-build", "-cb",
                "--hierarchical-allreduce", "--no-hierarchical-allreduce", "--timeline-mark-cycles",
                "--mpi-threads-disable", "--tcp", "--binding-args"}
NO_EQUIVALENT = {
    "--fusion-threshold-mb": "DDP buckets gradients itself: DistributedDataParallel(bucket_cap_mb=...)",
    "--cycle-time-ms": "no DDP counterpart (DDP reduces a bucket as soon as its gradients are ready)",
    "--cache-capacity": "no DDP counterpart",
    "--timeline-filename": "use torch.profiler in the script",
    "--min-np": "elastic: torchrun --nnodes MIN:MAX --max-restarts K",
    "--max-np": "elastic: torchrun --nnodes MIN:MAX --max-restarts K",
    "--host-discovery-script": "elastic: torchrun --nnodes MIN:MAX with a c10d rendezvous",
    "--hostfile": "give the hosts with -H to get one line per node",
    "-hostfile": "give the hosts with -H to get one line per node",
    "--network-interfaces": "set GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME on each node",
}


@dataclasses.dataclass
class HorovodrunLine:
    np: int
    hosts: list[tuple[str, int]]          # (host, slots), in order
    command: list[str]                    # the training command
    ignored: list[tuple[str, str]]        # (option, what to do instead)


def parse_horovodrun(line: str) -> HorovodrunLine:
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"--launch: cannot split the command line ({exc})") from None
    if not words or words[0].rsplit("/", 1)[-1] != "horovodrun":
        raise UsageError("--launch expects a horovodrun command line, e.g. \"horovodrun -np 4 -H a:2,b:2 python "
                         "train.py\"")
    np, hosts_text, ignored = None, None, []
    i = 1
    while i < len(words):
        word = words[i]
        option, _, inline = word.partition("=") if word.startswith("--") else (word, "", "")
        if option in VALUE_OPTIONS:
            if inline:
                value = inline
            elif i + 1 < len(words):
                value, i = words[i + 1], i + 1
            else:
                raise UsageError(f"--launch: {option} needs a value")
            if option in ("-np", "-n", "--num-proc"):
                try:
                    np = int(value)
                except ValueError:
                    raise UsageError(f"--launch: {option} needs a number, got {value!r}") from None
            elif option in ("-H", "--hosts"):
                hosts_text = value
            elif option in NO_EQUIVALENT:
                ignored.append((option, NO_EQUIVALENT[option]))
        elif option in FLAG_OPTIONS:
            pass
        elif word.startswith("-"):
            raise UsageError(f"--launch: unknown horovodrun option {word}")
        else:
            break
        i += 1
    command = words[i:]
    if not command:
        raise UsageError("--launch: no training command after the horovodrun options")
    hosts = _hosts(hosts_text, np)
    if np is None:
        np = sum(slots for _, slots in hosts)
    if np <= 0:
        raise UsageError("--launch: -np must be positive")
    if np > sum(slots for _, slots in hosts):
        raise UsageError(f"--launch: -np {np} is more than the {sum(s for _, s in hosts)} slots of -H")
    return HorovodrunLine(np, hosts, command, ignored)


def _hosts(text: str | None, np: int | None) -> list[tuple[str, int]]:
    if text is None:
        if np is None:
            raise UsageError("--launch: give -np (and -H for several hosts)")
        return [("localhost", np)]
    hosts = []
    for part in text.split(","):
        name, _, slots = part.strip().partition(":")
        try:
            count = int(slots) if slots else 1
        except ValueError:
            raise UsageError(f"--launch: bad host {part!r} in -H (expected host:slots)") from None
        if not name or count <= 0:
            raise UsageError(f"--launch: bad host {part!r} in -H (expected host:slots)")
        hosts.append((name, count))
    return hosts


def _training_command(command: list[str], script_replacement: tuple[str, str] | None) -> list[str]:
    """`python train.py args` -> `train.py args` (torchrun runs Python itself); `python -m pkg` -> `-m pkg`."""
    if script_replacement is not None:
        command = [script_replacement[1] if word == script_replacement[0] else word for word in command]
    if command[0].rsplit("/", 1)[-1].startswith("python"):
        rest = command[1:]
        while rest and rest[0].startswith("-") and rest[0] != "-m":  # python's own flags (-u, -O)
            rest = rest[1:]
        return rest
    return ["--no-python", *command]


def torchrun_lines(line: str, script_replacement: tuple[str, str] | None = None, job_id: str = "job") -> list[str]:
    """The torchrun lines, as comments and commands to print. script_replacement: (original, migrated)."""
    parsed = parse_horovodrun(line)
    command = _training_command(parsed.command, script_replacement)
    # horovodrun fills the hosts in order: ranks 0..slots-1 on the first host, and so on.
    layout, left = [], parsed.np
    for host, slots in parsed.hosts:
        if left <= 0:
            break
        layout.append((host, min(slots, left)))
        left -= min(slots, left)
    out = []
    if len(layout) == 1:
        out += [f"# one host ({layout[0][0]}), {layout[0][1]} processes:",
                shlex.join(["torchrun", "--standalone", "--nproc-per-node", str(layout[0][1]), *command])]
    else:
        endpoint = f"{layout[0][0]}:{RDZV_PORT}"
        if len({count for _, count in layout}) > 1:
            out.append("# the hosts run different numbers of processes: torchrun allows it, with ranks "
                       "numbered per node in rendezvous order")
        for node, (host, count) in enumerate(layout):
            out += [f"# on {host} (node {node} of {len(layout)}), {count} processes:",
                    shlex.join(["torchrun", "--nnodes", str(len(layout)), "--nproc-per-node", str(count),
                                "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint,
                                "--rdzv-id", job_id, *command])]
        out.append(f"# the rendezvous runs on {layout[0][0]}, port {RDZV_PORT}: it must be reachable from every "
                   "node. torchrun does not ssh as horovodrun does: start each line on its node. Node ranks come "
                   "from the rendezvous (add --node-rank with --rdzv-backend static to fix them)")
    for option, instead in parsed.ignored:
        out.append(f"# {option}: {instead}")
    out.append("# Slurm: docs/slurm.md; Kubernetes: docs/kubernetes.md")
    return out
