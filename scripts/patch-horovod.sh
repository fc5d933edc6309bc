#!/usr/bin/env bash
# Patch a Horovod 0.28.1 source tree so that it builds against current torch and behaves as documented.
#   scripts/patch-horovod.sh SRC_DIR     patch the unpacked source archive in place (fails if a patch misses)
#   scripts/patch-horovod.sh --level     print the patch level (part of the wheel cache key)
# Used by scripts/setup.sh, the Dockerfile and scripts/gpu-check.sh. Change LEVEL whenever a patch changes.
set -euo pipefail
LEVEL=p2
if [ "${1:-}" = --level ]; then echo "$LEVEL"; exit 0; fi
src=${1:?usage: patch-horovod.sh SRC_DIR | --level}
[ -f "$src/horovod/runner/__init__.py" ] || { echo "patch-horovod.sh: $src is not a Horovod source tree" >&2; exit 2; }

# torch >= 2.1 headers require C++17 (horovod PR #3998, merged upstream, never released).
sed -i 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/' \
    "$src/CMakeLists.txt" "$src/horovod/torch/CMakeLists.txt"
grep -q 'CMAKE_CXX_STANDARD 17' "$src/CMakeLists.txt" "$src/horovod/torch/CMakeLists.txt"
# gcc >= 13 no longer pulls these in transitively (horovod PR #3957).
sed -i '0,/#include <string>/s//#include <stdexcept>\n#include <string>/' "$src/horovod/common/common.h"
grep -q '#include <string>' "$src/horovod/common/group_table.h" \
    || sed -i '0,/#include </s//#include <string>\n#include </' "$src/horovod/common/group_table.h"
# horovod.run(): two stray trailing commas make the defaults the tuple (None,), which reaches the workers
# as HOROVOD_CYCLE_TIME="(None,)" and HOROVOD_CACHE_CAPACITY="(None,)"; strtod/strtol read both as 0, so
# a horovod.run job busy-loops its background thread with the response cache off (about 10x slower steps
# on 2 cores than horovodrun).
sed -i -E 's/^(        self\.(cycle_time_ms|cache_capacity) = None),$/\1/' "$src/horovod/runner/__init__.py"
if grep -qE 'self\.(cycle_time_ms|cache_capacity) = None,$' "$src/horovod/runner/__init__.py"; then exit 1; fi
# Process-set Gloo contexts (the global one included) ignore --network-interfaces: their device is built
# from an interface name that is never set, so Gloo binds the address of the host's own name (127.0.1.1
# on Debian) and peers on other hosts cannot connect. Take the global context's interface.
sed -i '/^void GlooContext::InitializeForProcessSet/,/device_attr.iface = gloo_iface_;/ s/^  device_attr.iface = gloo_iface_;/  gloo_iface_ = global_context.gloo_iface_;\n  device_attr.iface = gloo_iface_;/' \
    "$src/horovod/common/gloo/gloo_context.cc"
grep -q 'gloo_iface_ = global_context.gloo_iface_;' "$src/horovod/common/gloo/gloo_context.cc"
