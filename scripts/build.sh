#!/usr/bin/env bash
# Installs what is missing (scripts/setup.sh), configures and builds into
# ${THREADBURN_BUILD_DIR:-build}. Safe to run again: only what changed rebuilds.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${THREADBURN_BUILD_DIR:-build}
bash scripts/setup.sh
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
# Two jobs: each torch translation unit needs ~1.5 GB and this suite targets 2-core machines.
cmake --build "$BUILD_DIR" -j "${THREADBURN_JOBS:-$(nproc)}"
# The package byte-compiled, as an install would: with PYTHONDONTWRITEBYTECODE set (as on some
# machines and CI images) Python never writes its cache, and every `threadburn` started would
# compile the package's sources again (~0.3 s each; the tests start it hundreds of times).
/usr/bin/python3 -m compileall -q python tests/python bench >/dev/null
