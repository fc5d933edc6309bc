# hvd-compare: Horovod and PyTorch DDP on the same training job, in one image (docs/docker.md).
#
#   docker build -t hvd-compare .
#   docker run --rm -v "$PWD/results:/results" hvd-compare          # the default comparison
#
# Two stages. "builder" has the compilers: it builds Horovod 0.28.1 from its source archive exactly as
# scripts/setup.sh does (C++17 patch, --no-build-isolation against the installed torch), mpi4py against
# Debian's Open MPI, and installs the project into a virtual environment, /opt/venv. "runtime" is the
# base image plus Python, Open MPI and that virtual environment: no compilers, no headers.
#
# The CPU image is the default. The CUDA variant is the same file with other build arguments
# (docs/docker.md): CUDA base images, HOROVOD_GPU_OPERATIONS=NCCL and a CUDA build of torch.

# Base images: both stages must have the same Python at the same path (the environment is copied).
ARG BUILDER_IMAGE=debian:12.15-slim
ARG RUNTIME_IMAGE=debian:12.15-slim

# ---------------------------------------------------------------------------------------------------
FROM ${BUILDER_IMAGE} AS builder

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore

# Compilers, CMake, Python headers, and Open MPI with its headers (mpicc) from the distribution.
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        ca-certificates cmake g++ make \
        libopenmpi-dev openmpi-bin \
        python3 python3-dev python3-venv \
    && apt-get clean && rm -rf /var/lib/apt/lists/*

# Extra certificate authorities for the build only (a proxy that intercepts TLS): *.crt files put in
# docker/certs/ are trusted by pip in this stage. None are needed normally; nothing of this reaches
# the runtime image.
COPY docker/certs/ /usr/local/share/ca-certificates/hvd-compare/
RUN update-ca-certificates
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt

# Every Python package that is not built here is pinned to the versions the project was tested with.
COPY docker/constraints.txt /tmp/constraints.txt
ENV PIP_CONSTRAINT=/tmp/constraints.txt

# Another package index for every pip call of this stage (a mirror or proxy of the default one);
# normally unset. Build arguments of this stage do not reach the runtime image.
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL

RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH

# torch, pinned. TORCH_INDEX_URL: an extra package index for torch (for the CPU build, the CPU wheel
# index that PyTorch's install page names; for CUDA, the index of the matching CUDA version); empty
# means pip's default index. A wheel put in docker/wheels/ is found there first (--find-links); to
# make sure that it is the one installed, name its local label too: TORCH_VERSION=2.13.0+cpu
# (scripts/docker-test.sh does that). The installed version is checked.
ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=
COPY docker/wheels/ /tmp/wheels/
RUN if [ -n "$TORCH_INDEX_URL" ]; then \
        export PIP_EXTRA_INDEX_URL="${PIP_EXTRA_INDEX_URL:+$PIP_EXTRA_INDEX_URL }$TORCH_INDEX_URL"; fi \
    && pip install --find-links /tmp/wheels "torch==${TORCH_VERSION}" \
    && python -c "import sys, torch; v = torch.__version__; print('torch', v); \
sys.exit(v != '$TORCH_VERSION' and v.split('+')[0] != '$TORCH_VERSION')" \
    && rm -rf /tmp/wheels

# Horovod from its source archive, patched as scripts/setup.sh patches it (scripts/patch-horovod.sh says why:
# C++17 for torch >= 2.1, two includes for gcc >= 13, horovod.run's default cycle time and cache, the
# process-set Gloo interface). It builds without isolation so that it sees the torch above; first what its
# setup.py imports. HOROVOD_GPU_OPERATIONS=NCCL for the CUDA variant; empty for CPU.
ARG HOROVOD_VERSION=0.28.1
ARG HOROVOD_GPU_OPERATIONS=
COPY scripts/patch-horovod.sh /tmp/patch-horovod.sh
RUN set -eu; \
    pip install --constraint /tmp/constraints.txt setuptools wheel packaging psutil cloudpickle pyyaml cffi; \
    work=/tmp/horovod; src="$work/horovod-$HOROVOD_VERSION"; \
    pip download --no-deps --no-binary horovod "horovod==$HOROVOD_VERSION" -d "$work"; \
    tar -xzf "$work/horovod-$HOROVOD_VERSION.tar.gz" -C "$work"; \
    bash /tmp/patch-horovod.sh "$src"; \
    if [ -z "$HOROVOD_GPU_OPERATIONS" ]; then unset HOROVOD_GPU_OPERATIONS; fi; \
    jobs=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc); \
    export HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 \
        HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 MAKEFLAGS="-j$jobs"; \
    echo "building Horovod $HOROVOD_VERSION (gpu operations: ${HOROVOD_GPU_OPERATIONS:-none}); about 10 minutes on 2 cores"; \
    pip wheel --no-build-isolation --no-deps -w /wheels "$src" > "$work/build.log" 2>&1 \
        || { tail -n 60 "$work/build.log"; exit 1; }; \
    pip install --no-deps /wheels/horovod-*.whl; \
    rm -rf "$work"; \
    horovodrun --check-build

# mpi4py compiled against the system Open MPI (the one Horovod uses), then the project itself (last:
# a change to the project's code rebuilds only that), with its `compare` extra: the comparison's dependencies.
RUN pip install --constraint /tmp/constraints.txt --no-binary mpi4py mpi4py \
    && python -c "import mpi4py; mpi4py.rc.initialize = False; from mpi4py import MPI; \
print('mpi4py', mpi4py.__version__, 'on', MPI.Get_library_version().splitlines()[0])"
COPY pyproject.toml README.md /src/
COPY workload /src/workload
COPY hvd_impl /src/hvd_impl
COPY native_impl /src/native_impl
COPY compare /src/compare
COPY recorder /src/recorder
RUN pip install --no-binary mpi4py "/src[compare]" \
    && python -c "import compare, hvd_impl, native_impl, workload"

# What the runtime never uses (about 200 MB): torch's C++ headers (for compiling extensions; Horovod's
# is built) and its C++ test programs. torch_shm_manager stays.
RUN torch_dir=$(python -c 'import os, torch; print(os.path.dirname(torch.__file__))') \
    && rm -rf "$torch_dir/include" "$torch_dir/test" "$torch_dir"/bin/test_* "$torch_dir"/bin/*Test \
        "$torch_dir"/bin/protoc* \
    && python -c "import torch, horovod.torch; print('torch', torch.__version__, 'imports')"

# ---------------------------------------------------------------------------------------------------
FROM ${RUNTIME_IMAGE} AS runtime

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# Python and Open MPI (openmpi-bin brings its libraries); tini reaps the launchers' orphans as PID 1;
# OpenSSH, because Kubeflow's MPIJob starts its workers' ranks over ssh (docs/kubernetes.md).
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        openmpi-bin python3 tini openssh-client openssh-server \
    && mkdir -p /run/sshd \
    && apt-get clean && rm -rf /var/lib/apt/lists/*

# A non-root user whose home is writable (horovodrun keeps a cache in ~/.horovod). A base image that
# already has a user with this UID (Ubuntu's "ubuntu") loses it.
ARG USER_UID=1000
RUN if existing=$(getent passwd "$USER_UID"); then userdel "${existing%%:*}"; fi \
    && useradd --create-home --uid "$USER_UID" --shell /bin/bash hvd \
    && install -d -o hvd -g hvd /results

COPY --from=builder /opt/venv /opt/venv
COPY docker/entrypoint.sh /usr/local/bin/hvd-entrypoint
COPY docker/hvd_gloo_node.py docker/multinode.sh /opt/hvd-compare/

# Open MPI's single-copy shared memory (CMA) needs ptrace rights a container normally lacks.
# Matplotlib writes its cache to a directory that any user can create.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    OMPI_MCA_btl_vader_single_copy_mechanism=none \
    MPLCONFIGDIR=/tmp/matplotlib

# /results is where a host directory is meant to be mounted (docker run -v "$PWD/results:/results").
USER ${USER_UID}
WORKDIR /home/hvd

# Options alone (docker run IMAGE --np 1,2,4) are passed to the comparison; any other command runs as is.
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/hvd-entrypoint"]
CMD ["python", "-m", "compare", "run", "--out", "/results"]
