#!/bin/sh
# Host discovery for elastic Horovod on ONE machine: the same host under two names, one slot each.
# Horovod blacklists the host of a failed worker; with a single name (localhost:2) that takes every slot
# and the job stops ("blacklisted slots count == 2"), with two names only the failed worker's slot goes.
echo localhost:1
echo 127.0.0.1:1
