"""A stand-in for Databricks' sparkdl.HorovodRunner, for `compare migrate --verify` where sparkdl is not installed
(it ships only with Databricks Runtime ML up to 15.4). It does what HorovodRunner does with the training function:
pickle it with cloudpickle and run it in |np| Horovod processes, here under `horovodrun -np |np| --gloo` on this
host (HorovodRunner: mpirun on the driver for np < 0, on np Spark tasks for np > 0), and return rank 0's return
value. Only compare/verify/sparkdl_standin/run_original.py puts it on sys.path.
"""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import cloudpickle

WORKER = Path(__file__).resolve().parents[1] / "worker.py"


class HorovodRunner:
    def __init__(self, *, np: int, driver_log_verbosity: str = "log_callback_only"):
        if np == 0:
            raise ValueError("HorovodRunner(np=0) means every task slot of a Databricks cluster: give np here")
        self.num_processor = abs(np)
        self.np = np
        self.driver_log_verbosity = driver_log_verbosity

    def run(self, main, **kwargs):
        where = "the driver" if self.np < 0 else f"{self.np} Spark tasks"
        horovodrun = Path(sys.executable).parent / "horovodrun"
        command = [str(horovodrun) if horovodrun.exists() else (shutil.which("horovodrun") or "horovodrun"),
                   "-np", str(self.num_processor), "-H", f"localhost:{self.num_processor}", "--gloo",
                   "--network-interfaces", "lo", sys.executable, str(WORKER)]
        print(f"sparkdl stand-in: HorovodRunner(np={self.np}) would run {main.__name__} on {where}; here: "
              f"{' '.join(command[:4])} --gloo ...", flush=True)
        with tempfile.TemporaryDirectory(prefix="horovodrunner-") as directory:
            with open(os.path.join(directory, "main.pkl"), "wb") as out:
                cloudpickle.dump((main, kwargs), out)
            subprocess.run([*command, directory], check=True)
            with open(os.path.join(directory, "result.pkl"), "rb") as result:
                return pickle.load(result)
