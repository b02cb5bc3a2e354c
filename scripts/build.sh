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
# A job per CPU (each torch translation unit needs ~1.5 GB; this suite targets 2-core machines).
# nproc without the OpenMP variables: GNU nproc honours OMP_NUM_THREADS and OMP_THREAD_LIMIT, so a
# shell with OMP_NUM_THREADS=1 (torchrun's default, a launcher's) built on one core and ran the
# test command's shared pass 2 at a time; the same in scripts/test.sh and the local Slurm's CPUs.
cmake --build "$BUILD_DIR" -j "${THREADBURN_JOBS:-$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)}"
# The package byte-compiled, as an install would: with PYTHONDONTWRITEBYTECODE set (as on some
# machines and CI images) Python never writes its cache, and every `threadburn` started would
# compile the package's sources again (~0.3 s each; the tests start it hundreds of times).
/usr/bin/python3 -m compileall -q python tests/python bench >/dev/null
