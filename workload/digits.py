"""scikit-learn's handwritten digits, read from the file scikit-learn ships, without importing scikit-learn.

`load_digits()` answers as `sklearn.datasets.load_digits()` does for the fields the jobs here use (`data`,
`images`, `target`): the same file, the same values and dtypes. `import sklearn.datasets` costs about a second
of CPU (scipy and most of sklearn come with it), as much as torch's own import, and every worker of every
launch would pay it; the built-in digits workload and the example scripts load their data through this instead.
"""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path
from typing import NamedTuple

import numpy

from workload.errors import UsageError


class Digits(NamedTuple):
    data: numpy.ndarray  # 1797 x 64 pixels in 0..16, float64
    images: numpy.ndarray  # the same pixels, 1797 x 8 x 8
    target: numpy.ndarray  # 1797 labels 0..9, int64


def digits_file() -> Path:
    # find_spec of a top-level package locates it without running its __init__.
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise UsageError("the digits data ship with scikit-learn, which is not installed (pip install scikit-learn)")
    return Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data" / "digits.csv.gz"


def load_digits() -> Digits:
    with gzip.open(digits_file(), "rt") as text:
        table = numpy.loadtxt(text, delimiter=",")  # per row: 64 pixels, then the label
    data = table[:, :-1]
    return Digits(data=data, images=data.reshape(-1, 8, 8), target=table[:, -1].astype(int))
