"""The Horovod module itself handed on within a file: returned by an accessor (`return hvd`), or passed to a
function of the same file that receives it under the same name (`main(hvd, args)` with `def main(hvd, args)`).

The rewrite migrates every `hvd.x` of a file, whatever scope binds `hvd`; so where the module is handed on to
code of the same file, torch.distributed can be handed on in its place (`return dist`, `main(dist, args)`,
`def main(dist, args)`) and the receiving code, migrated with the rest, reads torch.distributed's API. Handed
to anything else (a library, a function that names it otherwise), it is left, and flagged as before.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from compare.migrate.read.parsed import Parsed


def module_passed_on(parsed: Parsed, aliases: set[str]) -> set[int]:
    """The ids of the Name nodes that hand on the Horovod module (`aliases`: the names bound to horovod.torch)
    and can hand on torch.distributed instead: returned values, arguments, and the parameters receiving them."""
    parents = parsed.parents
    functions: dict[str, list[cst.FunctionDef]] = {}
    for function in parsed.findall(m.FunctionDef()):
        functions.setdefault(function.name.value, []).append(function)  # type: ignore[union-attr]
    found: set[int] = set()
    for name in parsed.findall(m.Name()):
        if name.value not in aliases:  # type: ignore[union-attr]
            continue
        parent = parents.get(name)
        if isinstance(parent, cst.Return) and parent.value is name:
            found.add(id(name))
        elif isinstance(parent, cst.Arg) and parent.value is name and parent.star == "":
            call = parents.get(parent)
            if isinstance(call, cst.Call) and isinstance(call.func, cst.Name):
                receiving = _receiving_params(functions.get(call.func.value, []), call, parent)
                if receiving and all(p.name.value == name.value for p in receiving):  # type: ignore[union-attr]
                    found |= {id(name), *(id(p.name) for p in receiving)}
    return found


def _receiving_params(functions: list[cst.FunctionDef], call: cst.Call, arg: cst.Arg) -> list[cst.Param]:
    """The parameter that receives `arg` in each definition of the called function; [] where one has none."""
    position = None if arg.keyword is not None else [a for a in call.args if a.keyword is None].index(arg)
    params = []
    for function in functions:
        positional = [*function.params.posonly_params, *function.params.params]
        if position is not None:
            if position >= len(positional):
                return []
            params.append(positional[position])
        else:
            named = [p for p in [*positional, *function.params.kwonly_params]
                     if p.name.value == arg.keyword.value]  # type: ignore[union-attr]
            if not named:
                return []
            params.append(named[0])
    return params
