"""Distributed backends, chosen by name on the command line (--backend)."""

from backends.base import Backend
from backends.horovod_backend import HorovodBackend
from backends.local import LocalBackend

BACKENDS: dict[str, type[Backend]] = {"horovod": HorovodBackend, "local": LocalBackend}


def get_backend(name: str) -> Backend:
    if name not in BACKENDS:
        raise SystemExit(f"unknown backend {name!r}: one of {', '.join(sorted(BACKENDS))}")
    return BACKENDS[name]()
