"""Run a Databricks script whose sparkdl is not installed, as `python SCRIPT ARGS...` would, with `sparkdl`
resolving to the stand-in beside this file (sparkdl/__init__.py: HorovodRunner runs the training function under
horovodrun). `compare migrate --verify` runs the original of a HorovodRunner script this way.

python run_original.py SCRIPT ARGS...
"""

from __future__ import annotations

import os
import runpy
import sys

if __name__ == "__main__":
    script = os.path.abspath(sys.argv[1])
    sys.argv = sys.argv[1:]
    # As `python SCRIPT` does: the script's directory first; then the stand-in, so that `import sparkdl` finds it.
    sys.path[0] = os.path.dirname(script)
    sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))
    runpy.run_path(script, run_name="__main__")
