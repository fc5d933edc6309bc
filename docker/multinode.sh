#!/bin/bash
# One node's part of the two-framework comparison across containers (docker/compose.yaml starts one
# per node). Every node runs the same steps; the first node of NODES then analyses the records that the
# ranks wrote to the shared volume mounted at RESULTS.
#
#   1. DDP:     torchrun, multi-node, c10d rendezvous served on the first node
#   2. Horovod: hvd_gloo_node.py (Horovod on Gloo with horovodrun's own rendezvous server, no ssh)
#   3. first node only: python -m compare check, then python -m compare report RESULTS
#
# Variables (docker/compose.yaml sets them):
#   NODES           the nodes, in rank order (default node0,node1); this node is `hostname` unless NODE is set
#   NPROC_PER_NODE  workers per node (default 1)
#   IFACE           network interface between the nodes (default eth0)
#   WORKLOAD_ARGS   options for both implementations (default "--seeds 0,1,2"; see python -m hvd_impl --help)
#   RESULTS         the shared directory (default /results): RESULTS/runs/{ddp,horovod}-npN, RESULTS/report.md
#   TIMEOUT         seconds to wait for the other nodes at each rendezvous (default 300)
#   DDP_PORT, HOROVOD_PORT  the two rendezvous ports on the first node (default 29400, 29450)
set -euo pipefail

NODES=${NODES:-node0,node1}
NODE=${NODE:-$(hostname)}
NPROC_PER_NODE=${NPROC_PER_NODE:-1}
IFACE=${IFACE:-eth0}
WORKLOAD_ARGS=${WORKLOAD_ARGS:---seeds 0,1,2}
RESULTS=${RESULTS:-/results}
TIMEOUT=${TIMEOUT:-300}
DDP_PORT=${DDP_PORT:-29400}
HOROVOD_PORT=${HOROVOD_PORT:-29450}

IFS=, read -r -a nodes <<< "$NODES"
first=${nodes[0]}
world=$(( ${#nodes[@]} * NPROC_PER_NODE ))
hosts=$(printf "%s:$NPROC_PER_NODE," "${nodes[@]}"); hosts=${hosts%,}
read -r -a workload <<< "$WORKLOAD_ARGS"
case " ${nodes[*]} " in *" $NODE "*) ;; *) echo "multinode: this node ($NODE) is not in NODES=$NODES" >&2; exit 2 ;; esac

# Both frameworks alike: one torch thread per worker, traffic on the same interface.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} GLOO_SOCKET_IFNAME="$IFACE"
say() { printf '\n==> [%s] %s\n' "$NODE" "$*"; }

if [ "$NODE" = "$first" ]; then  # no stale records (the others wait for this node at the rendezvous)
    rm -rf "$RESULTS/runs/ddp-np$world" "$RESULTS/runs/horovod-np$world"
fi

say "DDP: torchrun on ${#nodes[@]} nodes x $NPROC_PER_NODE (c10d rendezvous at $first:$DDP_PORT)"
torchrun --nnodes "${#nodes[@]}" --nproc-per-node "$NPROC_PER_NODE" \
    --rdzv-backend c10d --rdzv-endpoint "$first:$DDP_PORT" --rdzv-id hvd-compare-ddp \
    --rdzv-conf "join_timeout=$TIMEOUT" \
    -m native_impl "${workload[@]}" --out "$RESULTS/runs/ddp-np$world"

say "Horovod: Gloo on $hosts (rendezvous at $first:$HOROVOD_PORT)"
python "$(dirname "$0")/hvd_gloo_node.py" --hosts "$hosts" --node "$NODE" --rendezvous "$first:$HOROVOD_PORT" \
    --iface "$IFACE" --timeout "$TIMEOUT" -- \
    python -m hvd_impl "${workload[@]}" --out "$RESULTS/runs/horovod-np$world"

if [ "$NODE" = "$first" ]; then
    say "parity of the two runs, then the report"
    status=0
    python -m compare check "$RESULTS/runs/horovod-np$world" "$RESULTS/runs/ddp-np$world" || status=$?
    python -m compare report "$RESULTS" || status=$?
    exit "$status"
fi
