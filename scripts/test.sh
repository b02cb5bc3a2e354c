#!/usr/bin/env bash
# The test command: set up and build, then the build-variant, unit, benchmark, install, Slurm
# and fleet tests.
#   scripts/test.sh            build (the other configurations: TBB, oneDNN, torch off, each
#                              configured and built for the parts it changes under
#                              $BUILD_DIR/variants), unit, bench, install (cmake --install and the .deb), slurm
#                              (a private one-node Slurm) and fleet (a private two-node Slurm
#                              in network namespaces); slurm and fleet are skipped if not root
#   scripts/test.sh unit       one label only (bench,install: those two in one ctest run)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${THREADBURN_BUILD_DIR:-build}
bash scripts/build.sh
# Each argument a label, or labels joined by commas that share one ctest run. The default:
# the variants alone (each builds on every core); the unit, install, Slurm and fleet tests
# together, two at a time where they may (ctest keeps the RUN_SERIAL ones, which measure time
# or CPU, alone on the machine; the Slurm and fleet tests check function, so they run beside
# the others); then the benchmarks one at a time: they measure CPU.
groups=("${@:-build unit,install,slurm,fleet bench}")
rc=0
for group in ${groups[@]}; do
  regex="^(${group//,/|})\$"
  case ",$group," in *,unit,*|*,slurm,*|*,fleet,*) jobs=$(nproc) ;; *) jobs=1 ;; esac
  echo "== ctest -L '$regex' -j $jobs"
  start=$(date +%s)
  (cd "$BUILD_DIR" && ctest -L "$regex" --output-on-failure -j "$jobs") || rc=1
  echo "== $group: $(( $(date +%s) - start )) s"
done
exit $rc
