#!/usr/bin/env bash
# The test command: set up and build, then the build-variant, unit, benchmark, install, Slurm
# and fleet tests.
#   scripts/test.sh            build (the other configurations: TBB, oneDNN, torch off, each
#                              configured and built for the parts it changes under
#                              $BUILD_DIR/variants), unit, bench, install (cmake --install and the .deb), slurm
#                              (a private one-node Slurm) and fleet (a private two-node Slurm
#                              in network namespaces); slurm and fleet are skipped if not root
#   scripts/test.sh unit       one label only
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${THREADBURN_BUILD_DIR:-build}
bash scripts/build.sh
labels=("${@:-build unit bench install slurm fleet}")
rc=0
for label in ${labels[@]}; do
  echo "== ctest -L $label"
  # Unit tests run in parallel (the live ones are RUN_SERIAL); benchmarks one
  # at a time: they measure CPU; the variants one at a time: each builds on every core.
  if [ "$label" = unit ]; then jobs=$(nproc); else jobs=1; fi
  (cd "$BUILD_DIR" && ctest -L "^${label}\$" --output-on-failure -j "$jobs") || rc=1
done
exit $rc
