"""Where the step times of a launch settle (MSER-5), and pinning a rank with every thread it has."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from compare.analysis.timing import settled_warmup


def test_a_slow_start_is_cut_and_a_settled_series_is_kept():
    rng = np.random.default_rng(0)
    settled = np.exp(rng.normal(np.log(1e-3), 0.1, 200))
    slow_start = settled.copy()
    slow_start[:20] *= np.linspace(4, 1.2, 20)  # allocator warm-up, lazy init: slower, then settling
    assert 15 <= settled_warmup(slow_start) <= 30
    assert settled_warmup(settled) <= 10


def test_too_few_steps_to_tell_leave_out_the_first():
    assert settled_warmup(np.array([5e-3, 1e-3, 1e-3])) == 1


def test_pinning_moves_every_thread_of_the_process():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one core: nothing to choose")
    # A thread started before the pin (as Horovod's and Gloo's are) must be moved too.
    code = ("import os, threading, time\n"
            "from workload.placement import pin_to_core\n"
            "threading.Thread(target=time.sleep, args=(2,), daemon=True).start()\n"
            "core = pin_to_core(1)\n"
            "masks = {t: os.sched_getaffinity(int(t)) for t in os.listdir('/proc/self/task')}\n"
            "print(core, len(masks), all(m == {core} for m in masks.values()))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == str(sorted(os.sched_getaffinity(0))[1]) and int(out[1]) >= 2 and out[2] == "True"
