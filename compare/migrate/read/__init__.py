"""Stage 1, read: the repository read once, how it is launched, and the Horovod names the migration knows.

The stages run read -> plan -> transform -> check -> the driver (compare/migrate/migrate_tree.py, rewrite.py) ->
report; a module imports from its own stage and the ones before it, never a later one
(tests/test_migrate_stages.py)."""
