#!/bin/sh
# The image's entry point (under tini). With no command, or with options only, it runs the comparison:
#   docker run --rm -v "$PWD/results:/results" hvd-compare                  # python -m compare run --out /results
#   docker run --rm -v "$PWD/results:/results" hvd-compare --np 1,2,4 --steps 50
# Any other command runs as it is, with the project's environment on PATH:
#   docker run --rm hvd-compare horovodrun -np 2 python -m hvd_impl --steps 20
set -e

# horovodrun keeps a cache in ~/.horovod: under `docker run --user UID:GID` HOME may be "/" and not ours.
if [ -z "${HOME:-}" ] || [ ! -w "${HOME}" ]; then
    export HOME="${TMPDIR:-/tmp}/home"
    mkdir -p "$HOME"
fi

if [ "$#" -eq 0 ] || [ "${1#-}" != "$1" ]; then
    set -- python -m compare run --out /results "$@"
fi

# The comparison writes to /results: say how to fix a mount this user cannot write to (the comparison
# itself then stops with "--out /results is not writable").
if [ "$1 $2 $3" = "python -m compare" ] && [ -d /results ] && [ ! -w /results ]; then
    case " $* " in
        *" /results"*) echo "hvd-entrypoint: /results is not writable by uid $(id -u): mount a directory" \
                            "this user may write to, or run with --user \"\$(id -u):\$(id -g)\"" >&2 ;;
    esac
fi

exec "$@"
