"""The driver: a repository (or one script, a repository of one file) migrated as one.

One read of the tree (compare/migrate/read/repository.py), then for each file that reaches Horovod: its indirect uses
written as imports (normalize.py), the rewrite (rewrite.py's migrate_source) with the helpers the whole tree
shares in one module, and the check of what came out. Nothing is written here: `TreeMigration.outputs()` is
every file that changes, as bytes in the file's own encoding and line endings; the command writes them
(-o, --in-place) or prints their diff.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import difflib  # the --diff output alone: line positions come from the passes (Migration.lines)
import multiprocessing
import os
import re
from pathlib import PurePosixPath

import libcst as cst

from compare.migrate.check.horovod_named import horovod_named
from compare.migrate.check.output_ddp import collective_methods, rank_only_method_calls
from compare.migrate.plan.added_helpers import HELPERS, helpers_module_code
from compare.migrate.plan.launch_facts import LaunchFacts, launch_facts_of
from compare.migrate.plan.migration import Change, Flag, Migration, NotMigratable
from compare.migrate.plan.path_differences import Differs, differing_paths
from compare.migrate.plan.switch_routes import route_switches, switch_routes
from compare.migrate.plan.switches import (
    Removed,
    horovod_only_in_switches,
    probe_aliases,
    remove_horovod_only_statements,
    remove_horovod_path,
)
from compare.migrate.plan.wrap_plan import TrainsArgument, repository_trainers
from compare.migrate.read import notes
from compare.migrate.read.flag_category import Category
from compare.migrate.read.horovod_api import is_horovod_module
from compare.migrate.read.import_reach import linked_directories, unreached_helpers
from compare.migrate.read.launches import Launch, launches_of
from compare.migrate.read.line_map import LineMap
from compare.migrate.read.normalize import (
    Normalized,
    class_module_names,
    held_module_attributes,
    horovod_accessors,
    horovod_bindings,
    normalize,
)
from compare.migrate.read.parsed import Parsed
from compare.migrate.read.repository import (
    Repository,
    SourceFile,
    imported_modules,
    tokenize_names,
    unique_name,
)
from compare.migrate.rewrite import migrate_source
from compare.migrate.transform.oldest_python import OLDEST_NAME, oldest_python_error
from compare.migrate.transform.rename import names_renamed
from compare.migrate.transform.spent_constants import without_spent_constants
from workload.errors import UsageError

PER_WORKER = 8  # files a worker process must have to pay for its start
HELPERS_MODULE = "ddp_helpers"  # the added module's name, made unique against the repository's names
HOROVOD_TEXT = re.compile("horovod", re.IGNORECASE)  # HorovodStrategy, MyHorovodPlugin: a file worth parsing
HOROVOD_MODULE = re.compile(r"^horovod(\.[\w.]+)?$", re.IGNORECASE)


@dataclasses.dataclass
class FileMigration:
    path: str
    source: SourceFile
    migration: Migration
    normalized: list[Normalized]
    entry: bool


@dataclasses.dataclass
class TreeMigration:
    repository: Repository
    files: list[FileMigration]           # the files that reached Horovod, in path order
    entry: str | None
    helpers_path: str | None = None      # the added module, relative to the root (the first, where there are more)
    helpers_code: str | None = None
    helpers_paths: list[str] = dataclasses.field(default_factory=list)  # each place it is written
    launches: list[Launch] = dataclasses.field(default_factory=list)    # how the users start the tree

    def launch_facts(self) -> LaunchFacts:
        """How the entry point (the single script, or --entry) is launched, as the migration read it; an entry
        with no Horovod of its own was not migrated, and is read here."""
        path = self.entry or next(iter(self.repository.files))
        found = next((f.migration.launch for f in self.files if f.path == path), None)
        return found if found is not None else launch_facts_of(self.repository.files[path].text)

    @property
    def flags(self) -> list[tuple[str, Flag]]:
        return [(f.path, flag) for f in self.files for flag in f.migration.flags]

    def outputs(self) -> dict[str, bytes]:
        """Relative path -> new bytes, for every file that changes or is added (the rest stays as it is)."""
        out = {f.path: f.source.encode(f.migration.code) for f in self.files if f.migration.code != f.source.text}
        if self.helpers_code:
            out.update(dict.fromkeys(self.helpers_paths or [self.helpers_path], self.helpers_code.encode("utf-8")))
        return out

    def diff(self) -> bytes:
        """A unified diff of the whole change, in git's a/ b/ form (`git apply` takes it): lines as the files hold
        them, in their own encoding and line endings."""
        chunks = []
        for path, new in sorted(self.outputs().items()):
            source = self.repository.files.get(path)
            before = _lines(source.raw.decode(source.encoding)) if source else []
            after = _lines(new.decode(source.encoding if source else "utf-8"))
            lines = list(difflib.unified_diff(before, after, f"a/{path}" if source else "/dev/null", f"b/{path}",
                                              n=3))
            if not lines:
                continue
            header = [f"diff --git a/{path} b/{path}\n"] + ([] if source else ["new file mode 100644\n"])
            chunks.append(("".join(header) + "".join(_ended(line) for line in lines))
                          .encode(source.encoding if source else "utf-8"))
        return b"".join(chunks)


def _lines(text: str) -> list[str]:
    """Lines split at "\n" alone, each with its ending ("\r\n" kept): str.splitlines would split at form feeds."""
    return [line for line in re.split(r"(?<=\n)", text) if line]


def _ended(line: str) -> str:
    return line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"


def _reaches_horovod(source: SourceFile, providers: dict[str, set[str]]) -> bool:
    if HOROVOD_TEXT.search(source.text):
        return True
    words = set(re.findall(r"[A-Za-z_][\w.]*", source.text))
    return any(name in words or name.rsplit(".", 1)[-1] in words for name in providers)


def _parse(source: SourceFile) -> cst.Module:
    try:
        return cst.parse_module(source.text)
    except cst.ParserSyntaxError as exc:
        raise UsageError(f"{source.path}: not valid Python (line {exc.raw_line}, column {exc.raw_column}): "
                         f"{str(exc.message).splitlines()[0]}") from None


def _module_name(path: str) -> str:
    parts = PurePosixPath(path).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _entry_paths(repository: Repository, parsed: dict[str, cst.Module], imports: dict[str, dict[str, set[str]]],
                 entry: str | None) -> set[str]:
    """The job's entry points: the one given, else each script (a `__main__` guard or no function of its own that
    others import) among the files that reach Horovod."""
    if entry is not None:
        return {entry}
    if repository.single_file:
        return set(repository.files)
    imported = {name for path in parsed for name in imports[path]}
    index = repository.module_index()
    imported_paths = {index[name] for name in imported if name in index}
    return {path for path, module in parsed.items()
            if "__name__" in repository.files[path].text or path not in imported_paths}


def migrate_tree(repository: Repository, *, entry: str | None = None) -> TreeMigration:
    """Every file that reaches Horovod, rewritten; UsageError when nothing does, or a file cannot be parsed."""
    if entry is not None and entry not in repository.files:
        raise UsageError(f"--entry {entry}: no such Python file in {repository.root}")
    candidates = {path: s for path, s in repository.files.items()
                  if repository.single_file or HOROVOD_TEXT.search(s.text)}
    parsed = {path: _parse(source) for path, source in candidates.items()}
    # Modules that bind horovod.torch at module level: another module may import that name from them.
    reexporters = {name: bound for path, module in parsed.items() if (bound := horovod_bindings(module))
                   for name in repository.files[path].module_names}
    # ... and functions that return it (`hvd = tinynet.distributed()`): a caller of one reaches Horovod too.
    accessors = {name: found for path, module in parsed.items() if (found := horovod_accessors(module))
                 for name in repository.files[path].module_names}
    providers = {**reexporters, **accessors}
    for path, source in repository.files.items():
        if path not in parsed and providers and _reaches_horovod(source, providers):
            parsed[path] = _parse(source)
    # A module name on a subclass's attribute, loaded by a base class elsewhere and kept on the object
    # (`self.dist_module = import_module(self.dist_module_name)`): the base, and every reader of the attribute.
    inherited = {name: value for module in parsed.values() for name, value in class_module_names(module).items()}
    held: set[str] = set()
    if inherited:
        for path, source in repository.files.items():
            if any(f"self.{name}" in source.text for name in inherited) and "import" in source.text:
                module = parsed.get(path) or _parse(source)
                if (found := held_module_attributes(module, inherited)):
                    held |= found
                    parsed[path] = module
        for path, source in repository.files.items():
            if path not in parsed and any(f"self.{name}." in source.text for name in held):
                parsed[path] = _parse(source)
    spent_elsewhere = set(inherited) if held else set()  # read by the base's loader alone, which goes
    if not parsed:
        raise UsageError(f"{repository.root if not repository.single_file else next(iter(repository.files))}: "
                         "no Horovod use: nothing imports or loads horovod")
    taken = repository.identifiers()
    helper_names = {name: unique_name(name, taken) for name in HELPERS if unique_name(name, taken) != name}
    helpers_module = None if repository.single_file else unique_name(HELPERS_MODULE, taken)
    # What each file imports, read once: for the entry points, the switches and the re-exports.
    imports = {path: imported_modules(module, _module_name(path)) for path, module in parsed.items()}
    entries = _entry_paths(repository, parsed, imports, entry)
    launches = launches_of(repository.root, {p: f.text for p, f in repository.files.items()}) \
        if not repository.single_file else []
    switched, differing = _remove_horovod_paths(repository, parsed, imports)
    if switched is not None:
        tree = _tree_of_switched(repository, parsed, switched, entries, entry)
        tree.launches = launches
        return tree
    normalized = {path: normalize(parsed[path], reexporters, _module_name(path), repository.files[path].text,
                                  imports[path], accessors, inherited, held) for path in sorted(parsed)}
    trainers = _trainers_index(repository, imports)
    homes = helpers_homes(set(repository.files), launches, helpers_module) if helpers_module else {}
    jobs = [(path, module.code if done else repository.files[path].text, homes[path][1] if homes else None,
             helper_names, path in entries, trainers) for path, (module, done, *_) in normalized.items()]
    # The files are rewritten apart from each other: on every core when there are enough to pay for the workers.
    workers = min(os.cpu_count() or 1, len(jobs) // PER_WORKER)
    if workers > 1:
        # The longest files first, a few at a time: no worker is left with a long file while the others idle.
        order = sorted(range(len(jobs)), key=lambda i: -len(jobs[i][1]))
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            by_job = dict(zip(order, pool.map(_rewrite, [jobs[i] for i in order], chunksize=2), strict=True))
        results = [by_job[i] for i in range(len(jobs))]
    else:
        results = [_rewrite(job) for job in jobs]
    files = []
    for (path, *_), result in zip(jobs, results, strict=True):
        done = normalized[path][1]
        if isinstance(result, str):  # nothing migratable in it
            if done or repository.single_file:
                raise UsageError(f"{repository.root / path if not repository.single_file else path}: {result}")
            # The word only: a comment, prose, or a module name a loader reads that the rewrite cannot see.
            untouched = Migration(repository.files[path].text, repository.files[path].text, [], [])
            _without_horovod_only_statements(untouched)
            _drop_spent_constants(untouched, spent_elsewhere)
            switched = bool(untouched.changes)  # (before _leftovers, whose notes alone change nothing)
            untouched.flags = _leftovers(untouched)
            if untouched.flags or switched:
                files.append(FileMigration(path, repository.files[path], untouched, [], path in entries))
            continue
        if done:
            _to_original_lines(result, normalized[path][3], done[0].line)
        result.source = repository.files[path].text
        result.lines = normalized[path][3].then(result.lines)
        _drop_spent_constants(result, normalized[path][2] | spent_elsewhere)
        _without_horovod_only_statements(result)
        result.flags += _leftovers(result)
        _refuse_own_unbound_names(path, result)
        files.append(FileMigration(path, repository.files[path], result, done, path in entries))
    if not files:
        raise UsageError(f"{repository.root}: no Horovod use: the word appears, but nothing imports or loads horovod")
    _say_where_own_paths_differ(repository, files, differing, entries)
    tree = TreeMigration(repository, files, entry, launches=launches)
    importers = {f.path for f in files if homes and any(
        _imports_helper(f.migration.code, name, helper_names, homes[f.path][1]) for name in HELPERS)}
    used = [name for name in HELPERS if any(_imports_helper(f.migration.code, name, helper_names, homes[f.path][1])
                                            for f in files if f.path in importers)]
    if helpers_module and used:
        # One module in each place an importing file reaches (the same code in each: whichever Python finds first
        # has every helper).
        tree.helpers_paths = sorted({homes[path][0] for path in importers})
        tree.helpers_path, tree.helpers_code = tree.helpers_paths[0], helpers_module_code(used, helper_names)
        _check_reach(tree, helpers_module)
    _check_rank_only_method_calls(tree, entries)
    return _compiled_on_oldest(tree)


def _say_where_own_paths_differ(repository: Repository, files: list[FileMigration], differing: dict[str, list[Differs]],
                                entries: set[str]) -> None:
    """Where the repository's own DDP path does another job than the Horovod branch beside it, that branch was
    migrated in place (the Horovod value of the switch runs it): the report says why at the own path's line,
    which stays as it was."""
    by_path = {f.path: f for f in files}
    for path, found in differing.items():
        migrated = by_path.get(path)
        if migrated is None:
            text = repository.files[path].text
            migrated = FileMigration(path, repository.files[path], Migration(text, text, [], []), [], path in entries)
            files.append(migrated)
        migrated.migration.changes = sorted([*migrated.migration.changes, *(
            Change(d.line, d.code, d.code, notes.OWN_PATH_DIFFERS.format(why=d.why)) for d in found)],
            key=lambda c: c.line)
    files.sort(key=lambda f: f.path)


def _check_rank_only_method_calls(tree: TreeMigration, entries: set[str]) -> None:
    """A method of a migrated class that makes a collective (a backend's `barrier()`), called under a rank
    condition in any file of the tree (`if rank == 0: backend.barrier()`): flagged at that line, as the check of
    each file flags the collective itself; a file the migration did not change is listed for it."""
    changed = [f for f in tree.files if f.migration.code != f.source.text and "class " in f.migration.code]
    methods = set().union(*(collective_methods(f.migration.code) for f in changed))
    if not methods:
        return
    by_path = {f.path: f for f in tree.files}
    called_on = re.compile(rf"([\w.]+)\.(?:{'|'.join(map(re.escape, sorted(methods)))})\(")
    for path, source in tree.repository.files.items():
        migrated = by_path.get(path)
        code = migrated.migration.code if migrated else source.text
        if not any(receiver not in ("dist", "torch.distributed") for receiver in called_on.findall(code)):
            continue  # (torch.distributed's own barrier is the check of each file's)
        findings = rank_only_method_calls(Parsed(code), methods)
        if not findings:
            continue
        if migrated is None:
            migrated = FileMigration(path, source, Migration(source.text, source.text, [], []), [], path in entries)
            tree.files.append(migrated)
        back = migrated.migration.lines
        known = {(flag.line, flag.category) for flag in migrated.migration.flags}
        migrated.migration.flags += [Flag(back.old_line(f.line) or 0, f.category, f.code, f.why, result_line=f.line)
                                     for f in findings if (back.old_line(f.line) or 0, f.category) not in known]
    tree.files.sort(key=lambda f: f.path)


def _check_reach(tree: TreeMigration, helpers_module: str) -> None:
    """Each launch of the migrated tree, resolved statically: an import of the helpers that resolves to nothing
    is flagged on its file (import_reach.py)."""
    files = {path: source.text for path, source in tree.repository.files.items()}
    files.update({f.path: f.migration.code for f in tree.files})
    files.update(dict.fromkeys(tree.helpers_paths, tree.helpers_code or ""))
    by_path = {f.path: f for f in tree.files}
    links = linked_directories(tree.repository.root)
    for launch in tree.launches:
        for unreached in unreached_helpers(launch, files, {helpers_module}, links):
            migrated = by_path.get(unreached.path)
            if migrated is None or any(flag.category == Category.HELPERS_UNREACHED
                                       for flag in migrated.migration.flags):
                continue
            migrated.migration.flags.append(Flag(
                migrated.migration.lines.old_line(unreached.line) or 0, "helpers unreached",
                migrated.migration.code.splitlines()[unreached.line - 1].strip()[:100],
                f"the added helpers do not resolve here when the tree is started as its users start it "
                f"({launch.found}): {unreached.why}; move {helpers_module}.py where this file's imports reach it",
                result_line=unreached.line))


def _remove_horovod_paths(repository: Repository, parsed: dict[str, cst.Module],
                          imports: dict[str, dict[str, set[str]]],
                          ) -> tuple[dict[str, tuple[cst.Module, list[Removed], LineMap]] | None,
                                     dict[str, list[Differs]]]:
    """Where the repository has a torch.distributed path of its own and reaches Horovod only through switches and
    probes: each file with its Horovod path removed (compare/migrate/plan/switches.py). None: migrate the Horovod code,
    with, per file, where the repository's own path does another job than the Horovod one beside it (then the
    Horovod branch is migrated in place, not routed to that path)."""
    if not any(word in s.text for s in repository.files.values()
               for word in ("init_process_group", "DistributedDataParallel")):
        return None, {}
    # A probe is a try statement: a file without the word has none, and is not walked for one.
    probes = {name: found for path, module in parsed.items()
              if "try" in repository.files[path].text and (found := probe_aliases(module))
              for name in repository.files[path].module_names}
    aliases = {}
    for path, module in parsed.items():
        imported = imports[path]
        names = probe_aliases(module) | horovod_bindings(module) | {
            name for source, taken in imported.items() for name in taken & probes.get(source, set())}
        names |= {n for source, taken in imported.items() if is_horovod_module(source) for n in taken}
        aliases[path] = names
        if not probes or not horovod_only_in_switches(module, names):
            return None, {}
    differing = {path: found for path, module in parsed.items() if (found := differing_paths(module, aliases[path]))}
    if differing:
        return None, differing
    # The Horovod option (and a default of horovod) now selects the DDP path; refused only where there is none.
    routes = switch_routes(parsed)
    switched = {}
    for path, module in parsed.items():
        new, removed, lines = remove_horovod_path(module, aliases[path], refuse=not routes)
        if routes.get(path):
            new, placed, routed = route_switches(new, routes[path])
            lines = lines.then(routed)
            if placed:
                removed.append(Removed(0, "", "; ".join(route.describe() for route in routes[path]),
                                       notes.SWITCH_ROUTED))
        switched[path] = (new, removed, lines)
    return switched, {}


def _tree_of_switched(repository: Repository, parsed: dict[str, cst.Module],
                      switched: dict[str, tuple[cst.Module, list[Removed], LineMap]], entries: set[str],
                      entry: str | None) -> TreeMigration:
    files = []
    for path in sorted(parsed):
        module, removed, lines = switched[path]
        source = repository.files[path]
        migration = Migration(source.text, module.code,
                              [Change(r.line, r.before, r.after, r.why) for r in removed], [],
                              launch=launch_facts_of(source.text) if path in entries else LaunchFacts(), lines=lines)
        _without_horovod_only_statements(migration)
        migration.flags = _leftovers(migration)
        if migration.code != source.text or migration.flags:
            files.append(FileMigration(path, source, migration, [], path in entries))
    return _compiled_on_oldest(TreeMigration(repository, files, entry))


def _compiled_on_oldest(tree: TreeMigration) -> TreeMigration:
    """The tree, once every file the migration writes compiles on the oldest Python the project supports (where
    the original did): a file that does not is a failure of the migration, never a result."""
    for f in tree.files:
        if f.migration.code == f.source.text or (broken := oldest_python_error(f.migration.code)) is None:
            continue
        if oldest_python_error(f.source.text) is None:
            where = f.path if not tree.repository.single_file else str(tree.repository.root / f.path)
            raise UsageError(f"{where}: the migration failed: the result does not compile on {OLDEST_NAME} "
                             f"(line {broken[0]} of the result: {broken[1]}); please report it")
    return tree


def _without_horovod_only_statements(migration: Migration) -> None:
    """The Horovod-only optimizer calls under the switches' Horovod branches removed from the result, in any file
    (switches.py): each a change at its original line."""
    code, removed, lines = remove_horovod_only_statements(migration.code)
    if not removed:
        return
    migration.changes = sorted([*migration.changes, *(Change(migration.lines.old_line(r.line) or 0, r.before,
                                                             r.after, r.why) for r in removed)], key=lambda c: c.line)
    _passed(migration, code, lines)


def _passed(migration: Migration, code: str, lines: LineMap) -> None:
    """A pass after the rewrite's: its code, its map composed, and the result lines the check's flags name moved
    with it (None where the pass removed the line)."""
    for flag in migration.flags:
        if flag.result_line is not None:
            flag.result_line = lines.new_line(flag.result_line)
    migration.code, migration.lines = code, migration.lines.then(lines)


def _to_original_lines(migration: Migration, normalized: LineMap, hoisted_from: int) -> None:
    """The lines of the changes and flags, counted in the normalized file (which may have an import hoisted to
    the top: compare/migrate/read/normalize.py), as the original's (`normalized`: the original's lines -> the
    normalized file's); a hoisted line is the line it came from."""
    for item in [*migration.changes, *migration.flags]:
        if item.line:
            item.line = normalized.old_line(item.line) or hoisted_from


def _drop_spent_constants(migration: Migration, spent: set[str]) -> None:
    """A constant that only told a loader which Horovod module to load (`BACKEND_MODULE = "horovod.torch"`) goes
    with the loader, where nothing else reads it."""
    # The check of the output ran before: what it said of a name a user chooses, or of a constant removed here,
    # no longer holds (the "horovod left" policy of _leftovers applies).
    migration.flags = [f for f in migration.flags if not (f.category == Category.HOROVOD_LEFT and (
        f.why.startswith('"horovod":') or any(re.match(rf"\s*{re.escape(n)}\s*=", f.code) for n in spent)))]
    if not spent:
        return
    code, removed, lines = without_spent_constants(migration.code, spent)
    for line, statement in removed:
        migration.changes.append(Change(migration.lines.old_line(line) or 0, statement, "", notes.SPENT_CONSTANT))
    _passed(migration, code, lines)


def _refuse_own_unbound_names(path: str, migration: Migration) -> None:
    """A name the result reads that nothing binds, where the original bound it, is the rewrite's own doing (an
    argument read where it is not bound, a statement it removed): the migration fails with the line (exit 2),
    never a flag on the user's code and never a tree written that raises NameError."""
    for flag in migration.flags:
        if flag.category == Category.UNBOUND_NAME:
            raise UsageError(f"{path}: the migration wrote a name that nothing binds, at line "
                             f"{flag.result_line or flag.line} of the result ({flag.code}): {flag.why}; nothing is "
                             "written (a fault of the tool: please report it with this file)")


def _trainers_index(repository: Repository, imports: dict[str, dict[str, set[str]]],
                    ) -> dict[str, tuple[TrainsArgument, ...]]:
    """The repository's functions that train a model they receive (`train_step(generator, ...)` in a module
    without Horovod), by `module.function`: a file that hands its model to one hands it the DDP wrapper. Only
    the modules the migrated files import (`import m`, `from m import f`, `from pkg import m`) that call
    backward() are read: no other module's function can be handed a model by them."""
    reached = {name for taken in imports.values() for module, names in taken.items()
               for name in (module, *(f"{module}.{n}" for n in names))}
    index: dict[str, tuple[TrainsArgument, ...]] = {}
    for source in repository.files.values():
        if "backward(" in source.text and reached.intersection(source.module_names):
            try:
                index.update(repository_trainers(Parsed(source.text), source.module_names))
            except cst.ParserSyntaxError:
                continue  # said where the file is migrated, if it is
    return index


def _rewrite(job: tuple[str, str, str | None, dict[str, str], bool, dict[str, tuple[TrainsArgument, ...]]],
             ) -> Migration | str:
    """One file's rewrite (in a worker process, maybe): the Migration, or why the file is not migratable.

    The rewrite names torch.distributed `dist`. Where the file binds `dist` itself (`from utils import dist`),
    its own `dist` is held aside under a placeholder while the rewrite runs, and torch.distributed takes a name
    the file does not use (`torch_dist`): neither shadows the other."""
    _, code, helpers_module, helper_names, end_of_job, trainers = job
    names = tokenize_names(code)
    own = "dist" in names
    held = unique_name("repository_dist", names) if own else ""
    try:
        migration = migrate_source(names_renamed(code, {"dist": held}) if own else code, helpers_module=helpers_module,
                                   helper_names=helper_names, end_of_job=end_of_job, trainers=trainers)
    except NotMigratable as exc:
        return str(exc)
    if own:
        torch_dist = unique_name("torch_dist", names)
        migration.code = names_renamed(migration.code, {"dist": torch_dist, held: "dist"})  # (no line moves)
        for change in migration.changes:
            change.after = _words(_words(change.after, "dist", torch_dist), held, "dist")
            change.before = _words(change.before, held, "dist")
        for flag in migration.flags:
            flag.code = _words(flag.code, held, "dist")
    return migration


def _words(text: str, old: str, new: str) -> str:
    return re.sub(rf"(?<![\w.]){re.escape(old)}\b", new, text)


def _imports_helper(code: str, name: str, renamed: dict[str, str], module: str | None) -> bool:
    return module is not None and re.search(rf"from {re.escape(module)} import .*\b{renamed.get(name, name)}\b",
                                            code) is not None


def helpers_homes(paths: set[str], launches: list[Launch], module: str) -> dict[str, tuple[str, str]]:
    """Per file: where the helpers module goes for it, and the name it imports it by. A file in a package (a
    directory with __init__.py) imports it relatively from the package's top: it reaches that however the package
    is reached (installed, through a symlink, from a script that extends sys.path). A script, or a module outside
    any package, imports it by name from beside itself: its own directory is on the import path whenever it runs
    or is imported. A file in a package that a command runs by its path (`python pkg/tool.py`) is a script."""
    scripts = {launch.target for launch in launches if not launch.as_module and not launch.found.endswith(
        "(a __main__ block)")}
    homes = {}
    for path in paths:
        directory = PurePosixPath(path).parent
        top = None
        while directory.parts and f"{directory}/__init__.py" in paths:
            top, directory = directory, directory.parent
        own = PurePosixPath(path).parent
        if top is None or path in scripts:
            homes[path] = (str(own / f"{module}.py") if own.parts else f"{module}.py", module)
        else:
            homes[path] = (str(top / f"{module}.py"), "." * (len(own.parts) - len(top.parts) + 1) + module)
    return homes


def _leftovers(migration: Migration) -> list[Flag]:
    """Horovod still named in the code: the name `horovod`, or a string that names its modules (what a loader
    reads, a registry's key). Docstrings, comments and attribute names (`args.horovod`) are prose or switches."""
    new_to_old = migration.lines.old_line
    flagged = {flag.line for flag in migration.flags}
    noted: set[int] = set()
    found = []
    lines = migration.code.splitlines()
    # The name `horovod` is Horovod only where an import binds it: else a parameter, a variable of the user's.
    named_at, imports_horovod = horovod_named(migration.code)
    for at in named_at:
        # A name: only where nothing was flagged (a flagged use keeps its import, and says so).
        named = at.string is None and not migration.flags and imports_horovod
        if at.string is not None:
            # "horovod.torch" is a module a loader may read; "horovod" alone is a name a user chooses (a backend's,
            # a registry's key), which now selects the migrated code: noted, not flagged.
            named = bool(HOROVOD_MODULE.match(at.string)) and at.string.lower() != "horovod"
            if at.string.lower() == "horovod" and (line := new_to_old(at.line) or 0) not in noted:
                noted.add(line)
                migration.changes.append(Change(line, lines[at.line - 1].strip()[:100],
                                                lines[at.line - 1].strip()[:100], notes.HOROVOD_NAME_KEPT))
        line = new_to_old(at.line) or 0
        if named and line not in flagged:
            flagged.add(line)
            found.append(Flag(line, Category.HOROVOD_LEFT, lines[at.line - 1].strip()[:100],
                              "Horovod is still named here after the migration (a module a loader reads, a "
                              "registry's entry, an import kept): remove it, or route it to the DDP path"))
    return found
