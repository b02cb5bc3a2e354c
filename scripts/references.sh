#!/usr/bin/env bash
# Regenerate the committed reference results in results/: every grid of
# configs/ into results/<grid>.csv (with its plots), `threadburn tune` on the two
# example trainings and within one run of a test program (--in-run), the
# monitor on a Python training and (as root) its exact mode on the built-in
# trainings, the measuring overheads, then results/FINDINGS.md.
# About 55 minutes on a 2-vCPU VM. Run it on a quiet machine: every figure is a
# time or a CPU share.
#   scripts/references.sh                 everything
#   scripts/references.sh default ddp     those grids only (then FINDINGS.md)
#   scripts/references.sh --tunes         the tunes only (then FINDINGS.md)
set -euo pipefail
cd "$(dirname "$0")/.."
GRIDS=(seed000 default blocktime launcher runtime loader oversubscription onednn batch_workers sampler ddp cuda)
PY=/usr/bin/python3   # Debian's interpreter: numpy, matplotlib and torch come from apt for it
grids=() tunes=0 overheads=0
case "${1:-}" in
  -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  --tunes) tunes=1 ;;
  "") grids=("${GRIDS[@]}") tunes=1 overheads=1 ;;
  *) grids=("$@") ;;
esac
for g in "${grids[@]}"; do
  [ -f "configs/$g.toml" ] || { echo "references.sh: no grid configs/$g.toml" >&2; exit 2; }
done
bash scripts/build.sh
start=$(date +%s)
step() { echo; echo "== [$(( ($(date +%s) - start) / 60 )) min] $*"; }

for g in "${grids[@]}"; do
  step "sweep $g"
  rm -rf "results/$g.plots" "results/$g.timelines" "results/$g.threads"
  decide=()
  [ "$g" = default ] && decide=(--decide --budget 12m)   # as scripts/run.sh runs it
  bin/threadburn sweep "$g" --out "results/$g.csv" --force --strict "${decide[@]}"
done

if [ "$tunes" = 1 ]; then
  # The sleep/step/sleep pattern of the first user report: the cost is the
  # CPU burned in the sleeps, so the balanced objective (least CPU among the
  # fastest) is the question.
  step "tune examples/sleep_step_sleep.py"
  bin/threadburn tune --out results/tune-sleep_step_sleep.csv --force --seed 1 \
    -- "$PY" examples/sleep_step_sleep.py --steps=4 --sleep_s=0.3 --threads=0 \
    | tee results/tune-sleep_step_sleep.txt
  # A throughput training: its own samples/s is the figure.
  step "tune examples/mnist_adadelta.py"
  bin/threadburn tune --out results/tune-mnist_adadelta.csv --force --seed 1 \
    --metric 'samples/s: ([0-9.]+)' --metric-better higher \
    -- "$PY" examples/mnist_adadelta.py --steps=40 --log-interval=0 \
    | tee results/tune-mnist_adadelta.txt
  # A verdict within one run (docs/in-run.md): regions of a fixed work that a
  # team of two does in half the time, the program started at one thread
  # (tests/bench/check_inrun.py's team_up).
  step "tune --in-run tests/cpp/regions_child"
  OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive bin/threadburn tune --in-run --block 0.3 \
    --out results/tune-inrun-team_up.csv --force --seed 1 \
    -- build/tests/cpp/regions_child --body=nap --work_us=4000 --regions=10 --gap_ms=0 --seconds=15 \
    | tee results/tune-inrun-team_up.txt
  rm -f results/tune-inrun-team_up.program.log   # the program's own output: nothing to keep
fi

if [ "$overheads" = 1 ]; then
  # The first user report's picture: a Python training's threads, recorded
  # by the monitor (exact where allowed), with the script's own log as marks.
  step "monitor on examples/sleep_step_sleep.py"
  rm -rf results/monitor && mkdir -p results/monitor
  for run in gomp llvm200; do
    env=()
    [ "$run" = llvm200 ] && env=(LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libomp.so.5 KMP_BLOCKTIME=200)
    m=results/monitor/$run
    env "${env[@]}" bin/threadburn monitor --out="$m.csv" --marks="$m.log" -- \
      "$PY" examples/sleep_step_sleep.py --steps=3 --sleep_s=1 --threads=2 --log="$m.log" 2> >(tee "$m.summary.txt" >&2)
    bin/threadburn monitor-plot "$m.csv" --marks "$m.log" --out "$m.png"
  done

  step "bench/exact_figures.py"
  if [ "$(id -u)" = 0 ]; then
    "$PY" bench/exact_figures.py --out results/monitor --rounds 5
  else
    echo "references.sh: not root: results/monitor/exact_* (the monitor's exact mode) left as they are" >&2
  fi

  step "bench/overheads.py"
  "$PY" bench/overheads.py --out results/overheads.csv
fi

step "findings"
bin/threadburn findings --write
step "done"
