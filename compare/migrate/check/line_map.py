"""Which line of a result a line of the original became, and back, from a line diff of the two texts."""

from __future__ import annotations

import difflib


def map_lines(original: str, new: str) -> dict[int, int | None]:
    """Original line number -> line number in the result (None: the line was removed), from a line diff."""
    old_lines, new_lines = original.splitlines(), new.splitlines()
    mapping: dict[int, int | None] = {}
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        for i in range(i1, i2):
            if tag == "equal":
                mapping[i + 1] = j1 + (i - i1) + 1
            elif tag == "replace":
                mapping[i + 1] = j1 + min(i - i1, j2 - j1 - 1) + 1
            else:  # delete
                mapping[i + 1] = None
    return mapping
