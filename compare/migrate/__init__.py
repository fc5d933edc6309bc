"""Migration assistant: Horovod PyTorch code -> torch.distributed + DDP for torchrun (`python -m compare migrate`).

The one map of the migration and its verification (tests/test_migrate_repository.py holds it to the files):

The stages, each a subpackage, run in this order; a module imports from its own stage and earlier ones, never a
later one (tests/test_migrate_stages.py). A script is a repository of one file.

read/: the repository read once, how it is launched, the Horovod names known
    read/repository.py             the tree read once: bytes, encodings, line endings, module names, imports, names
    read/launches.py               how the users start it (README and shell commands, entry points, __main__)
    read/import_reach.py           from each launch, whether the added helpers resolve as Python would resolve them
    read/normalize.py              Horovod loaded by name, re-exported or returned by an accessor: as its import
    read/line_map.py               which line of a pass's result each line became, and back, from what the pass
                                   replaced (a LibCST walk tracked statement by statement); a file's passes compose
    read/parsed.py                 a source read once (scopes, parents, positions): the passes and the check read it
    read/syntax.py                 small reads and builds of LibCST nodes
    read/horovod_api.py            the Horovod names and what each becomes
    read/notes.py                  the semantic note of each rewrite
    read/flag_category.py          what a flag says needs a person (Category)
plan/: pass 1 over each file (rewrite.py migrate_source: a visitor, a class per concern), the repository's own path
    plan/horovod_uses.py           pass 1: the imports, every hvd. name and call, the flags of what needs a person
    plan/accumulation_plan.py      backward_passes_per_step: which backward() syncs, a frozen plan from pass 1's records
    plan/uses_lightning.py         pass 1: a Lightning Trainer Horovod drove
    plan/uses_ray.py               pass 1: a job Ray starts (RayExecutor, Ray Train's HorovodTrainer)
    plan/uses_spark.py             pass 1: a job Spark starts (horovod.spark.run, sparkdl.HorovodRunner)
    plan/uses_base.py              pass 1: its records and lookups
    plan/passed_on.py              the Horovod module handed on within a file (returned, passed to a function)
    plan/wrap_plan.py              pass 1: where the model is trained; the DDP wrapper's name and what goes through it
    plan/launch_facts.py           how the original is launched (horovod.run sites, options, front-ends), for --verify
    plan/switches.py               a repository with a DDP path of its own: the Horovod path behind switches removed
    plan/switch_routes.py          ... its Horovod option routed to that path
    plan/path_differences.py       ... unless it does another job (gathers, all-reduces, checkpoint keys)
    plan/zero_step.py              Horovod's zero-gradient step in broadcast_optimizer_state: when it changes training
    plan/added_helpers.py          the helpers' code (each stands for one Horovod call); pass 1 keeps their names free
    plan/migration.py              what a migration gives back (Migration, Change, Flag)
transform/: pass 2 over each file (a transformer, a class per concern)
    transform/horovod_to_ddp.py    pass 2: the imports
    transform/to_ddp_expressions.py  pass 2: calls and names
    transform/to_ddp_statements.py   pass 2: statements replaced whole, the loops, the blocks, the end of the job
    transform/to_ddp_probes.py     pass 2: a Horovod availability probe -> a test of a torch.distributed job
    transform/to_ddp_ray.py        pass 2: Ray's front-ends -> TorchTrainer
    transform/to_ddp_spark.py      pass 2: Spark's front-ends -> TorchDistributor
    transform/to_ddp_base.py       pass 2: the plan it applies, what it changed, adds and imports
    transform/oldest_python.py     each result compiles on Python 3.11: strings inside f-strings in a free quote
    transform/rename.py            a name renamed over a file's tree (the driver holds a file's own `dist` aside)
    transform/spent_constants.py   a constant that only named the Horovod module a loader read, removed
check/: the whole result against the original; its findings join the flags
    check/output_check.py          the check, over the findings below
    check/output_names.py          unbound and newly shadowed names, Horovod left
    check/output_ddp.py            models trained but not averaged, .module, collectives under a rank condition
    check/horovod_named.py         where a result still names Horovod (the name, a string), from its tree
the driver, over a repository (imports every stage above; report/ reads what it gives back)
    migrate_tree.py                migrate_tree: which files reach Horovod, the passes per file, the helpers module
    rewrite.py                     migrate_source: the two passes over one file, then the check of the output
report/: what the command gives back
    report/migration_report.py     the one report (a script's X_ddp.migration.md, a repository's MIGRATION.md) and
                                   the terminal's summary line, both from the driver's TreeMigration
    report/launch_line.py          a horovodrun command line -> torchrun's, per node (--launch)
    report/tree_output.py          -o (staged, renamed when complete), --in-place (clean git tree only)
compare/verify/ (--verify: reads the driver's TreeMigration, never parses the script again)
    verify.py                each side launched as its users launch it (locally or as Slurm jobs), then judged
    launch_mode.py           horovodrun or horovod.run, from launch_facts and the arguments
    spark_launch.py          how each side of a Spark job runs
    speed.py                 each side's step time and throughput, and a verdict over rounds
    speed_design.py          --speed-rounds as a budget: compare run's planned looks, the first look's forecast
    step_times.py            the step times the rank tag writes, and a throughput a script prints
    rank_tag/                sitecustomize for both sides: rank-tagged lines, optimizer step times
    sparkdl_standin/         a stand-in HorovodRunner where sparkdl does not install
"""

from compare.migrate.rewrite import Change, Flag, Migration, NotMigratable, migrate_source

__all__ = ["Change", "Flag", "Migration", "NotMigratable", "migrate_source"]
