"""A small training kit: the distributed helpers and a trainer."""
