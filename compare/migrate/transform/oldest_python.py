"""The migrated files compile on the oldest Python the project supports (3.11), whatever Python runs the tool.

Python 3.12 (PEP 701) lets an f-string's braces hold the f-string's own quote, a backslash or a comment; 3.11
rejects each. A rewrite may put a string into an f-string's braces (`f"{hvd.local_size()}"` ->
`os.environ["LOCAL_WORLD_SIZE"]` inside it): `with_free_quotes` writes each string inside braces in the quote its
f-strings leave free, and `oldest_python_error` says where a file still breaks 3.11's rules. compile() alone checks
the running Python's rules (3.12+ accepts the nested quote), and ast.parse(feature_version=(3, 11)) does not apply
3.11's f-string rules either: the f-string rules are read here from the concrete syntax tree, as 3.11's tokenizer
read them (the whole f-string one string token, its braces' text inside it).
"""

from __future__ import annotations

import ast
import re

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from compare.migrate.read.syntax import NoAttributeHooks

OLDEST = (3, 11)  # pyproject.toml's requires-python
OLDEST_NAME = f"Python {OLDEST[0]}.{OLDEST[1]}"
QUOTES = ('"', "'")
MAY_HOLD_FSTRING = re.compile(r"""(?<![\w])[rRbB]?[fF][rR]?['"]""")


def _quote(start: str) -> str:
    """The quote of a string literal or an f-string from its start (`rf'''` -> `'''`)."""
    body = start.lstrip("rRbBuUfF")
    return body[:3] if body[:3] in ('"""', "'''") else body[:1]


def _clashes(code: str, enclosing: list[str]) -> bool:
    """Does a literal's text end an enclosing f-string early under 3.11's tokenizer (its quote, or a backslash)?"""
    return "\\" in code or any((quote in code) if len(quote) == 3 else (quote[0] in code) for quote in enclosing)


class _FreeQuotes(NoAttributeHooks, cst.CSTTransformer):
    """Each string literal inside an f-string's braces whose quote would close that f-string on 3.11, in the other
    quote (when its text holds neither that quote nor a backslash; else left, and the check says so)."""

    def __init__(self) -> None:
        super().__init__()
        self.enclosing: list[str] = []

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        self.enclosing.append(_quote(node.start))

    def leave_FormattedString(self, original: cst.FormattedString, updated: cst.FormattedString,
                              ) -> cst.FormattedString:
        self.enclosing.pop()
        quote = _quote(updated.start)
        if not self.enclosing or len(quote) == 3 or not any(q[0] == quote for q in self.enclosing):
            return updated
        free = self._free()
        if free is None or free in cst.Module([]).code_for_node(updated)[len(updated.start):-len(updated.end)]:
            return updated
        return updated.with_changes(start=updated.start[:-1] + free, end=free)

    def leave_SimpleString(self, original: cst.SimpleString, updated: cst.SimpleString) -> cst.SimpleString:
        value = updated.value
        quote = _quote(value)
        if not self.enclosing or len(quote) == 3 or not _clashes(value, self.enclosing):
            return updated
        free = self._free()
        prefix = value[: len(value) - len(value.lstrip("rRbBuU"))]
        body = value[len(prefix) + 1:-1]
        if free is None or free in body or "\\" in body:
            return updated
        return updated.with_changes(value=f"{prefix}{free}{body}{free}")

    def _free(self) -> str | None:
        """The quote no enclosing f-string uses, if there is one."""
        used = {quote[0] for quote in self.enclosing}
        return next((quote for quote in QUOTES if quote not in used), None)


def with_free_quotes(module: cst.Module) -> cst.Module:
    """The module with every string inside an f-string's braces in a quote 3.11 accepts there (where one is free)."""
    if not MAY_HOLD_FSTRING.search(module.code):
        return module
    return module.visit(_FreeQuotes())


class _FStringRules(NoAttributeHooks, cst.CSTVisitor):
    """3.11's rules for the text inside an f-string's braces: not the f-string's quote, no backslash, no comment."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self) -> None:
        super().__init__()
        self.enclosing: list[str] = []
        self.broken: tuple[int, str] | None = None

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        self.enclosing.append(_quote(node.start))

    def leave_FormattedString(self, original_node: cst.FormattedString) -> None:
        self.enclosing.pop()

    def visit_FormattedStringExpression(self, node: cst.FormattedStringExpression) -> None:
        if self.broken is not None:
            return
        code = cst.Module([]).code_for_node(node.expression)
        quote = self.enclosing[-1]
        line = self.get_metadata(PositionProvider, node).start.line
        if "\\" in code:
            self.broken = (line, "a backslash inside an f-string's braces")
        elif "#" in re.sub(r"""(['"]).*?\1""", "", code):
            self.broken = (line, "a comment inside an f-string's braces")
        elif quote in code:
            self.broken = (line, f"the f-string's own quote ({quote}) inside its braces")


def oldest_python_error(code: str) -> tuple[int, str] | None:
    """Where `code` does not compile on the oldest supported Python, and why; None when it compiles."""
    try:
        compile(code, "<migrated>", "exec", dont_inherit=True)
        ast.parse(code, feature_version=OLDEST)
    except SyntaxError as exc:
        return exc.lineno or 0, exc.msg
    return f_string_error(code)


def f_string_error(code: str) -> tuple[int, str] | None:
    """The first f-string whose braces break 3.11's rules (which 3.12's compile() accepts), else None."""
    if not MAY_HOLD_FSTRING.search(code):
        return None
    try:
        wrapper = MetadataWrapper(cst.parse_module(code), unsafe_skip_copy=True)
    except cst.ParserSyntaxError as exc:
        return exc.raw_line, str(exc.message).splitlines()[0]
    rules = _FStringRules()
    wrapper.visit(rules)
    return rules.broken
