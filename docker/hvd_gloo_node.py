"""Start this node's share of a Horovod job on Gloo, across machines (containers) that have no ssh.

horovodrun reaches other hosts only through ssh. This does, per node, what horovodrun --gloo does for
all of them (horovod/runner/gloo_run.py, as Horovod's Ray and Spark integrations do it too): the first
node serves Horovod's HTTP rendezvous; every node starts its own workers with the variables
horovodrun would give them (HOROVOD_RANK, _SIZE, _LOCAL_RANK, ..., HOROVOD_GLOO_RENDEZVOUS_ADDR/_PORT,
HOROVOD_CONTROLLER=gloo). Run it on every node with the same --hosts; ranks are assigned as horovodrun
assigns them (host by host, in --hosts order).

    python hvd_gloo_node.py --hosts node0:2,node1:2 --node node0 --rendezvous node0:29450 --iface eth0 \
        -- python -m hvd_impl --steps 20 --out /shared/runs/horovod-np4

Exit status: 0 when every local worker exits 0; else the first failure's status, after the other local
workers are stopped (as horovodrun does, it prints "Process R exit with status code C.").
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time

from horovod.runner.common.util.hosts import get_host_assignments, parse_hosts
from horovod.runner.gloo_run import create_run_env_vars, create_slot_env_vars
from horovod.runner.http.http_server import RendezvousHandler, RendezvousHTTPServer
from horovod.runner.util.threads import in_thread


def wait_for_port(host: str, port: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((host, port), timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"hvd_gloo_node: no rendezvous at {host}:{port} after {timeout_s:.0f} s") from None
            time.sleep(0.5)


def signal_group(process: subprocess.Popen, sig: int) -> None:
    """Signal a worker and everything it started (it leads a session of its own)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", required=True, help="every node and its slots, in rank order: node0:2,node1:2")
    parser.add_argument("--node", default=socket.gethostname(), help="this node's name in --hosts")
    parser.add_argument("--rendezvous", required=True,
                        help="HOST:PORT of the rendezvous, served by the first node of --hosts")
    parser.add_argument("--iface", default="eth0", help="network interface Gloo uses (HOROVOD_GLOO_IFACE)")
    parser.add_argument("--timeout", type=float, default=300,
                        help="seconds to wait for the rendezvous and for the other nodes' workers")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the worker command")
    return parser


def supervise(workers: dict[int, subprocess.Popen]) -> int:
    """Wait for the local workers; at the first failure stop the others (SIGTERM, SIGKILL after 10 s) and
    return its status, as horovodrun does."""

    def stop(_signum=None, _frame=None) -> None:
        for process in workers.values():
            if process.poll() is None:
                signal_group(process, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    status, stopped_at = 0, None
    try:
        running = dict(workers)
        while running:
            for rank, process in list(running.items()):
                code = process.poll()
                if code is None:
                    continue
                del running[rank]
                if code != 0:
                    print(f"Process {rank} exit with status code {code}.", flush=True)
                    if status == 0:
                        status = code if code > 0 else 128 - code
                        stop()
                        stopped_at = time.monotonic()
            if stopped_at is not None and time.monotonic() - stopped_at > 10:
                for process in running.values():  # a worker that does not answer SIGTERM
                    signal_group(process, signal.SIGKILL)
            time.sleep(0.2)
    finally:
        stop()
    return status


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no worker command given (after --)")

    hosts = parse_hosts(args.hosts)
    plan = get_host_assignments(hosts, sum(host.slots for host in hosts))
    mine = [slot for slot in plan if slot.hostname == args.node]
    if not mine:
        parser.error(f"--node {args.node} is not one of --hosts {args.hosts}")
    host, _, port_text = args.rendezvous.rpartition(":")
    port = int(port_text)
    address = socket.gethostbyname(host)

    server = None
    if args.node == hosts[0].hostname:
        server = RendezvousHTTPServer(("0.0.0.0", port), RendezvousHandler, 0)
        server.init(plan)
        in_thread(target=server.serve_forever)
    else:
        wait_for_port(address, port, args.timeout)

    run_env = {key: str(value) for key, value in create_run_env_vars(address, [args.iface], port).items()}
    # WORKLOAD_LAUNCHER: the workers cannot otherwise tell this launcher from horovodrun --gloo.
    env = {**os.environ, **run_env, "PYTHONUNBUFFERED": "1", "WORKLOAD_LAUNCHER": "hvd_gloo_node"}
    env.setdefault("HOROVOD_GLOO_TIMEOUT_SECONDS", str(int(args.timeout)))
    workers = {slot.rank: subprocess.Popen(command, env={**env, **create_slot_env_vars(slot)},
                                           start_new_session=True) for slot in mine}
    print(f"hvd_gloo_node: {args.node} started ranks {sorted(workers)} of {len(plan)}", flush=True)
    try:
        return supervise(workers)
    finally:
        if server is not None:
            server.shutdown()


if __name__ == "__main__":
    sys.exit(main())
