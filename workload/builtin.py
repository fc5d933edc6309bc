"""The built-in workloads' names and one-line summaries: what `--help` lists, importable without torch (the
workloads themselves are in workload/workloads.py, which takes its summaries from here)."""

from __future__ import annotations

PLUGIN_FORMS = "MODULE:FUNCTION or FILE.py:FUNCTION"
SUMMARIES = {
    "mlp": "MLP on synthetic classification, fast, the default",
    "digits": "small CNN on scikit-learn's 8x8 handwritten digits, test accuracy per epoch",
    "resnet": "residual conv net on synthetic 32x32 images, for timing",
    "lm": "byte-level causal transformer on the Python standard library's sources",
}
WORKLOAD_METAVAR = "{" + ",".join(SUMMARIES) + ",MODULE:FUNCTION,FILE.py:FUNCTION}"


def describe_workloads() -> str:
    return "; ".join(f"{name} ({summary})" for name, summary in SUMMARIES.items())
