"""Migration assistant: Horovod PyTorch code -> torch.distributed + DDP for torchrun (`python -m compare migrate`).

The one map of the migration and its verification (tests/test_migrate_repository.py holds it to the files):

The driver, over a repository (a script is a repository of one file)
    migrate_tree.py          migrate_tree: which files reach Horovod, the passes below per file, the helpers module
    repository.py            the tree read once: bytes, encodings, line endings, module names, imports, names
    switches.py              a repository with a DDP path of its own: the Horovod path behind switches removed
    switch_routes.py         ... its Horovod option routed to that path
    path_differences.py      ... where that path does another job (gathers, all-reduces, checkpoint keys): not routed
    normalize.py             Horovod loaded by name, re-exported or returned by an accessor: written as its import
    tree_output.py           -o (staged, renamed when complete), --in-place (clean git tree only)
    tree_report.py           MIGRATION.md for the repository
The rewrite of one file (rewrite.py migrate_source: pass 1 a visitor, pass 2 a transformer, a class per concern)
    rewrite.py               the two passes, then the check of the output
    horovod_uses.py          pass 1: the imports, every hvd. name and call, the flags of what needs a person
    uses_accumulation.py     pass 1: backward_passes_per_step, which backward() syncs
    uses_lightning.py        pass 1: a Lightning Trainer Horovod drove
    uses_ray.py              pass 1: a job Ray starts (RayExecutor, Ray Train's HorovodTrainer)
    uses_spark.py            pass 1: a job Spark starts (horovod.spark.run, sparkdl.HorovodRunner)
    uses_base.py             pass 1: its records and lookups
    passed_on.py             the Horovod module handed on within a file (returned, passed to a function)
    wrap_plan.py             pass 1: where the model is trained; the DDP wrapper's name and what goes through it
    launch_facts.py          how the original is launched (horovod.run sites, options, front-ends), for --verify
    launches.py              how the users start the repository (README and shell commands, entry points, __main__)
    import_reach.py          from each launch, whether the added helpers resolve as Python would resolve them
    horovod_to_ddp.py        pass 2: the imports
    to_ddp_expressions.py    pass 2: calls and names
    to_ddp_statements.py     pass 2: statements replaced whole, the loops, the blocks, the end of the job
    to_ddp_probes.py         pass 2: a Horovod availability probe -> a test of a torch.distributed job
    to_ddp_ray.py            pass 2: Ray's front-ends -> TorchTrainer
    to_ddp_spark.py          pass 2: Spark's front-ends -> TorchDistributor
    to_ddp_base.py           pass 2: the plan it applies, what it changed, adds and imports
    horovod_api.py           the Horovod names and what each becomes
    added_helpers.py         the helpers' code (each stands for one Horovod call)
    notes.py                 the semantic note of each rewrite
    zero_step.py             Horovod's zero-gradient step in broadcast_optimizer_state: when it changes training
    syntax.py                small reads and builds of LibCST nodes
    migration.py             what a migration gives back (Migration, Change, Flag)
    flag_category.py         what a flag says needs a person (Category)
The check of the output
    output_check.py          the whole result against the original; its findings join the flags
    output_names.py          unbound and newly shadowed names, Horovod left
    output_ddp.py            models trained but not averaged, .module, collectives under a rank condition
    output_parsed.py         a source read once for the check
    oldest_python.py         each result compiles on Python 3.11: strings inside f-strings in a free quote, the check
Reports and launch lines
    migration_report.py      a single script's report
    launch_line.py           a horovodrun command line -> torchrun's, per node (--launch)
compare/verify/ (--verify: reads the driver's TreeMigration, never parses the script again)
    verify.py                each side launched as its users launch it (locally or as Slurm jobs), then judged
    launch_mode.py           horovodrun or horovod.run, from launch_facts and the arguments
    spark_launch.py          how each side of a Spark job runs
    speed.py                 each side's step time and throughput, and a verdict over rounds
    step_times.py            the step times the rank tag writes, and a throughput a script prints
    rank_tag/                sitecustomize for both sides: rank-tagged lines, optimizer step times
    sparkdl_standin/         a stand-in HorovodRunner where sparkdl does not install
"""

from compare.migrate.rewrite import Change, Flag, Migration, NotMigratable, migrate_source

__all__ = ["Change", "Flag", "Migration", "NotMigratable", "migrate_source"]
