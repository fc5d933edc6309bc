"""The check of a migrated file (compare.migrate.check.output_check), its names part: names the result reads that
nothing binds, names that now resolve to another binding, and Horovod left in imports and strings."""

from __future__ import annotations

import re

import libcst as cst
import libcst.matchers as m
from libcst.metadata import Assignment, BaseAssignment

from compare.migrate.read.flag_category import Category
from compare.migrate.read.parsed import Finding, Parsed, scope_key

MODULE_NAMES = {"__file__", "__name__", "__doc__", "__spec__", "__loader__", "__package__", "__builtins__",
                "__path__", "__annotations__", "__dict__"}
HOROVOD_STRING = re.compile(r"horovod(\.\w+)*|HOROVOD_[A-Z_]+")



def _is_definition(assignment: BaseAssignment) -> bool:
    """An import, def or class (what F811 counts): not an ordinary assignment to a variable, nor a plain
    `import a.b` (which binds `a` to the same module however often it is written)."""
    node = getattr(assignment, "node", None)
    if isinstance(node, cst.Import):
        return any(alias.asname is not None for alias in node.names)
    return isinstance(node, (cst.ImportFrom, cst.FunctionDef, cst.ClassDef))


def _resolutions(parsed: Parsed) -> dict[tuple[str, str], frozenset[tuple[str, bool]]]:
    """(scope, name) -> where each read of that name there resolves: (the binding's scope, is it a definition).
    An empty set: unbound."""
    found: dict[tuple[str, str], frozenset[tuple[str, bool]]] = {}
    for scope in parsed.all_scopes():
        for access in scope.accesses:
            name = access.node.value if isinstance(access.node, cst.Name) else None
            if name is None or name in MODULE_NAMES:
                continue
            targets = frozenset((scope_key(r.scope), _is_definition(r)) for r in access.referents
                                if isinstance(r, Assignment))
            if any(not isinstance(r, Assignment) for r in access.referents):
                targets |= {("builtins", True)}
            key = (scope_key(scope), name)
            found[key] = found.get(key, frozenset()) | targets
    return found


def _definitions(parsed: Parsed) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    for scope in parsed.all_scopes():
        for assignment in scope.assignments:
            if isinstance(assignment, Assignment) and _is_definition(assignment):
                key = (scope_key(scope), assignment.name)
                counts[key] = counts.get(key, 0) + 1
    return counts


def _has_star_import(parsed: Parsed) -> bool:
    return bool(parsed.findall(m.ImportFrom(names=m.ImportStar())))


def check_names(original: Parsed, result: Parsed) -> list[Finding]:
    """Names unbound in the result that the original bound, and names that now resolve elsewhere."""
    if _has_star_import(result):
        return []  # any name may come from the star: nothing to tell
    before, after = _resolutions(original), _resolutions(result)
    first_read = _first_reads(result)
    findings = []
    for key, targets in after.items():
        scope, name = key
        where = first_read.get(key, 0)
        if not targets:
            if key in before and not before[key]:
                continue  # unbound in the original too: not the migration's doing
            findings.append(result.finding(where, Category.UNBOUND_NAME, f"`{name}` is read here (scope "
                                           f"{scope or 'module'}) but nothing binds it"))
        elif key in before and before[key] and targets != before[key]:
            findings.append(result.finding(where, Category.SHADOWED_NAME, f"`{name}` here now resolves to another "
                                           "binding than in the original (an added import or helper, or a "
                                           "name of the script's over it)"))
    defs_before, defs_after = _definitions(original), _definitions(result)
    bound_before = {(scope_key(s), a.name) for s in original.all_scopes() for a in s.assignments}
    for key, count in defs_after.items():
        if count > defs_before.get(key, 0) and (count > 1 or (key in bound_before and key not in defs_before)):
            findings.append(result.finding(_first_binding(result, key), Category.SHADOWED_NAME,
                                           f"`{key[1]}` is bound by an added import or def where the script "
                                           "already binds it"))
    reads_before, reads_after = _read_counts(original), _read_counts(result)
    for name in {n for (scope, n) in defs_after if scope == "" and ("", n) not in defs_before}:
        # an import or helper the migration added for the whole module, and a function binding that name
        # for itself: the added code's reads of it there would get the function's own value
        for scope in result.all_scopes():
            key = (scope_key(scope), name)
            if key[0] and any(a.name == name for a in scope.assignments) and key not in defs_after \
                    and reads_after.get(key, 0) > reads_before.get(key, 0):
                findings.append(result.finding(_first_binding(result, key), Category.SHADOWED_NAME,
                                               f"`{name}` (added for the whole module) is bound here by the "
                                               f"script's own code too, which hides the added one in "
                                               f"{key[0].lstrip('/')}"))
    return findings


def _read_counts(parsed: Parsed) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    for scope in parsed.all_scopes():
        for access in scope.accesses:
            if isinstance(access.node, cst.Name):
                key = (scope_key(scope), access.node.value)
                counts[key] = counts.get(key, 0) + 1
    return counts


def _first_reads(parsed: Parsed) -> dict[tuple[str, str], int]:
    lines: dict[tuple[str, str], int] = {}
    for scope in parsed.all_scopes():
        for access in scope.accesses:
            if isinstance(access.node, cst.Name):
                key = (scope_key(scope), access.node.value)
                line = parsed.line(access.node)
                lines[key] = min(lines.get(key, line), line)
    return lines


def _first_binding(parsed: Parsed, key: tuple[str, str]) -> int:
    lines = [parsed.line(a.node) for s in parsed.all_scopes() if scope_key(s) == key[0]
             for a in s.assignments if a.name == key[1] and isinstance(a, Assignment)]
    return max(lines, default=0)


def check_horovod_left(result: Parsed) -> list[Finding]:
    findings = []
    for node in result.findall(m.Import() | m.ImportFrom()):
        names = ([cst.helpers.get_full_name_for_node(a.name) or "" for a in node.names]  # type: ignore[union-attr]
                 if isinstance(node, cst.Import) else
                 [cst.helpers.get_full_name_for_node(node.module) or ""] if node.module else [])  # type: ignore[union-attr]
        if any(n == "horovod" or n.startswith("horovod.") for n in names):
            findings.append(result.finding(node, Category.HOROVOD_LEFT, "Horovod is still imported here"))
    for string in result.findall(m.SimpleString()):
        value = string.evaluated_value  # type: ignore[union-attr]
        if isinstance(value, str) and HOROVOD_STRING.fullmatch(value):
            what = "a variable only horovodrun sets" if value.startswith("HOROVOD_") else "a Horovod module name"
            findings.append(result.finding(string, Category.HOROVOD_LEFT, f'"{value}": {what}'))
    return findings
