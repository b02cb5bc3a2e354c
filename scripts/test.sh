#!/usr/bin/env bash
# The test command: set up and build, then the build-variant, sanitizer, unit, benchmark,
# install, Slurm and fleet tests.
#   scripts/test.sh            build (the other configurations: TBB, oneDNN, torch off, each
#                              configured and built for the parts it changes under
#                              $BUILD_DIR/variants), sanitize (the probe, the sampler, omptap and
#                              the in-run path built with ASan + UBSan and with TSan under
#                              $BUILD_DIR/variants, their live tests run under each), unit,
#                              bench, install (cmake --install and the .deb), slurm
#                              (a private one-node Slurm) and fleet (a private two-node Slurm
#                              in network namespaces); slurm and fleet are skipped if not root
#   scripts/test.sh unit       one label only (bench,install: those two as one set)
#   scripts/test.sh sanitize   the sanitized builds and their live tests (docs/probe.md, "Sanitizers")
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${THREADBURN_BUILD_DIR:-build}
root=$PWD
bash scripts/build.sh
# Each argument a label, or labels joined by commas that run as one set. The default: the
# variants alone (each builds on every core), then every other label as one set in two passes:
# first the tests that may share the machine (not RUN_SERIAL: their checks are of function,
# or hold under load), nproc + 1 at a time (they also wait on daemons, browsers, package tools
# and process starts: on this 2-core VM the pass took 400 s at nproc, 302 s at nproc + 1 with the
# cores busy 88 % of it); then those that measure time or CPU (RUN_SERIAL), one at a time, alone.
# (One ctest run of both kinds would drain the machine before each RUN_SERIAL test, idling a core
# behind every long test started before it.)
groups=("${@:-build unit,install,slurm,fleet,bench,sanitize}")
rc=0
for group in ${groups[@]}; do
  regex="^(${group//,/|})\$"
  start=$(date +%s)
  if [ "$group" = build ]; then
    echo "== ctest -L '$regex' -j 1"
    (cd "$BUILD_DIR" && ctest -L "$regex" --output-on-failure -j 1) || rc=1
  else
    mapfile -t pass < <(cd "$BUILD_DIR" && ctest --show-only=json-v1 | /usr/bin/python3 "$root/scripts/test_passes.py" "$regex")
    [ "${#pass[@]}" = 2 ] || { echo "test.sh: could not list the tests of $group" >&2; exit 1; }
    for i in 0 1; do
      [ "${pass[$i]}" = none ] && continue
      jobs=$([ "$i" = 0 ] && echo $(( $(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) + 1 )) || echo 1)
      echo "== ctest -L '$regex', $([ "$i" = 0 ] && echo "the tests that may share the machine" || echo "RUN_SERIAL, one at a time") (-j $jobs)"
      (cd "$BUILD_DIR" && ctest -I "${pass[$i]}" --output-on-failure -j "$jobs") || rc=1
    done
  fi
  echo "== $group: $(( $(date +%s) - start )) s"
done
exit $rc
