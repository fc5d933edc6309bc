"""Stage 4, check: the whole result read against the original; its findings join the flags."""
