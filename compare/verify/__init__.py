"""Verification of a migration (`compare migrate ... --verify`): the original under horovodrun (or its own
front-end), the migration under torchrun, both judged as `compare check` judges two runs. It reads what the
migration gives back (compare.migrate.migrate_tree.TreeMigration: the code, the flags, the launch facts the
rewrite read off the tree it parsed) and never parses the script again. The modules are listed in
compare/migrate/__init__.py's map.
"""
