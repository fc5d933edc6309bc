"""The node index the migration reads a tree through (compare/migrate/read/parsed.py) answers as LibCST's own
m.findall and ParentNodeProvider do: the same nodes in the same order, over the whole tree or within a node."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import libcst.matchers as m
import pytest
from libcst.metadata import MetadataWrapper, ParentNodeProvider

from compare.migrate.read.parsed import NodeIndex

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "examples" / "horovod_scripts").glob("*.py"))
MATCHERS = [m.Call(), m.Name(), m.Attribute() | m.Name(), m.Import() | m.ImportFrom(), m.SimpleString(),
            m.Assign(value=m.Call(func=m.Name())), m.Call(func=m.Attribute(attr=m.Name("step")))]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.stem)
def test_the_index_finds_what_findall_finds(script):
    module = cst.parse_module(script.read_text(encoding="utf-8"))
    index = NodeIndex(module)
    assert index.parents == dict(MetadataWrapper(module, unsafe_skip_copy=True).resolve(ParentNodeProvider))
    blocks = m.findall(module, m.FunctionDef() | m.ClassDef() | m.If() | m.IndentedBlock())
    for matcher in MATCHERS:
        assert index.findall(matcher) == list(m.findall(module, matcher))
        for block in blocks:
            assert index.findall(matcher, block) == list(m.findall(block, matcher))
