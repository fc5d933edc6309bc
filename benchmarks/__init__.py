"""Reference programs that `python -m compare bench` launches: bare training loops and an allreduce sweep."""
