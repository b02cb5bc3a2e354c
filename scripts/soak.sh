#!/usr/bin/env bash
# Run the live tests many times, quiet and with one core kept busy, and count
# each test's failures: a bound that holds once may still be tuned to one
# machine (docs/design.md, "Known answers"). Needs a built tree (scripts/build.sh).
#   scripts/soak.sh                  the quick live tests, 30 rounds quiet + 30 busy
#   scripts/soak.sh -n 5 -L bench    the benchmark tier, 5 + 5 rounds
#   scripts/soak.sh -n 10 -R 'probe\.live' --busy-only
#   scripts/soak.sh -n 10 -R tune_hidden   the rule on hidden slowdowns, 10 + 10 rounds
#   scripts/soak.sh -n 20 -R '^monitor\.marks\.' --keep-all   every round's output kept (the figures)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${THREADBURN_BUILD_DIR:-build}
# The tests that measure time or CPU of live threads (the rest are pure).
LIVE='^(Clock|ThreadClocks|Residual|Sampler|Barrier)\.|^Procfs\.ReadsOwn|^Pipeline\.LoaderThreads|^Ddp(GroupLive|KnownAnswer)\.|^runtime\.|^monitor\.live\.|^monitor\.exact\.|^monitor\.marks\.|^probe\.live\.|^host\.live\.'
rounds=30 select=(-R "$LIVE") modes=(quiet busy) keep_all=
usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    -n) rounds=${2:?-n needs a count}; shift 2 ;;
    -L) select=(-L "^${2:?-L needs a label}\$"); shift 2 ;;
    -R) select=(-R "${2:?-R needs a regex}"); shift 2 ;;
    --busy-only) modes=(busy); shift ;;
    --quiet-only) modes=(quiet); shift ;;
    --keep-all) keep_all=1; shift ;;
    -h|--help) usage 0 ;;
    *) echo "soak.sh: unknown argument '$1'" >&2; usage 2 >&2 ;;
  esac
done
case "$rounds" in ''|*[!0-9]*|0) echo "soak.sh: -n wants a positive count, not '$rounds'" >&2; exit 2 ;; esac
[ -f "$BUILD_DIR/CTestTestfile.cmake" ] || { echo "soak.sh: no build in $BUILD_DIR: run scripts/build.sh" >&2; exit 2; }
count=$(cd "$BUILD_DIR" && ctest -N "${select[@]}" | sed -n 's/^Total Tests: //p')
[ "${count:-0}" -gt 0 ] || { echo "soak.sh: no test matches ${select[*]}" >&2; exit 2; }

log=$(mktemp -d)
keep=$(mktemp -d /tmp/soak-failures.XXXXXX)  # the output of every round that failed
spinner=
trap '[ -n "$spinner" ] && kill "$spinner" 2>/dev/null; rm -rf "$log"; rmdir "$keep" 2>/dev/null || true' EXIT
rc=0
for mode in "${modes[@]}"; do
  if [ "$mode" = busy ]; then
    # One core taken by a process that never sleeps, as another tenant would.
    sh -c 'while :; do :; done' & spinner=$!
  fi
  : >"$log/failed"; : >"$log/skipped"
  start=$(date +%s)
  for ((i = 1; i <= rounds; i++)); do
    # One at a time: the live tests measure CPU.
    (cd "$BUILD_DIR" && ctest "${select[@]}" -j 1 --output-on-failure ${keep_all:+-V} >"$log/round" 2>&1) ||
      cp "$log/round" "$keep/$mode-$i.log"
    if [ -n "$keep_all" ]; then cp "$log/round" "$keep/$mode-$i.all.log"; fi
    # ctest's closing list names failed tests and skipped ones alike: a skip
    # (a test that needs what this machine lacks) is no failure.
    sed -n '/(Skipped)$/d; s/^[[:space:]]*[0-9]* - \(.*\) (\(Failed\|Timeout\|.*\))$/\1/p' "$log/round" >>"$log/failed"
    # ... but a round it skipped did not show what the test is for either: counted apart.
    sed -n 's/^[[:space:]]*[0-9]* - \(.*\) (Skipped)$/\1/p' "$log/round" >>"$log/skipped"
    printf '\r%s: round %d/%d, %d failure(s) so far' "$mode" "$i" "$rounds" "$(wc -l <"$log/failed")" >&2
  done
  echo >&2
  [ -n "$spinner" ] && { kill "$spinner"; wait "$spinner" 2>/dev/null || true; spinner=; }
  echo "$mode: $count tests x $rounds rounds in $(( $(date +%s) - start )) s"
  if [ -s "$log/failed" ]; then
    sort "$log/failed" | uniq -c | while read -r n name; do echo "  FAILED $n/$rounds  $name"; done
    echo "  their output: $keep/$mode-*.log"
    rc=1
  else
    echo "  every test passed every round it ran"
  fi
  if [ -s "$log/skipped" ]; then
    sort "$log/skipped" | uniq -c | while read -r n name; do echo "  SKIPPED $n/$rounds  $name"; done
  fi
done
exit $rc
