"""Stage 6, report: what the command gives back from the driver's result (MIGRATION.md, the launch lines) and
where it writes it (-o, --in-place). Stage 5 is the driver, compare/migrate/migrate_tree.py and rewrite.py."""
