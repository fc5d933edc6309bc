"""Migration assistant: Horovod PyTorch script -> torch.distributed + DDP for torchrun (`python -m compare migrate`).

rewrite.py    the source-to-source rewrite (LibCST): migrate_source; its two passes, a visitor each made of one
              class per concern, are horovod_uses.py and uses_*.py, horovod_to_ddp.py and to_ddp_*.py
notes.py      the semantic note of each rewrite
migration_report.py   the Markdown report beside the output
launch_line.py        horovodrun command line -> torchrun lines per node
verify.py     run both under their launchers and compare the records
"""

from compare.migrate.rewrite import Change, Flag, Migration, NotMigratable, migrate_source

__all__ = ["Change", "Flag", "Migration", "NotMigratable", "migrate_source"]
