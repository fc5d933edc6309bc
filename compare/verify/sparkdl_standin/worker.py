"""One Horovod process of the sparkdl stand-in (sparkdl/__init__.py): main(**kwargs) from DIR/main.pkl; rank 0
writes what it returned to DIR/result.pkl, as HorovodRunner returns rank 0's value.

python worker.py DIR     (under horovodrun)
"""

from __future__ import annotations

import os
import sys

import cloudpickle

if __name__ == "__main__":
    directory = sys.argv[1]
    with open(os.path.join(directory, "main.pkl"), "rb") as pickled:
        main, kwargs = cloudpickle.load(pickled)
    result = main(**kwargs)
    if os.environ.get("HOROVOD_RANK", "0") == "0":
        path = os.path.join(directory, "result.pkl")
        with open(path + ".tmp", "wb") as out:
            cloudpickle.dump(result, out)
        os.replace(path + ".tmp", path)
