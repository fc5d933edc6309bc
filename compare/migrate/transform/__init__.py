"""Stage 3, transform: pass 2, which applies a file's plan and writes the DDP form, and the rewrite of what the
oldest Python cannot compile."""
