#!/usr/bin/env bash
# The device check: one command that checks threadburn's GPU path on a lent
# GPU host (an NVIDIA GPU, a CUDA PyTorch wheel importable by python3, cmake,
# gcc, the CUDA toolkit; no package registry needed: deps/ from
# `scripts/gpu_host.sh deps` travels with the tree), in at most --budget-s
# seconds (default 530: one call of at most 9 minutes), from the repository's root:
#
#   scripts/gpu_check.sh [--stand-in] [--build-dir DIR] [--budget-s N] [--steps a,b,...]
#                        [--python PY] [--torch DIR] [--work DIR]
#
# Steps, each under its own time limit and a running deadline (a step that
# has not the least time it needs left is skipped, said in a SKIP row; a step
# that fails or overruns its limit is a FAIL row, and the next step runs), in
# this order (s on an H200: limit, least, expected; a CUDA PyTorch process takes
# 13-17 s from start to exit there):
#   preflight  60, 5, 12: the GPU (nvidia-smi, torch), the driver, torch, the CPUs
#   build      300, 30, 106: scripts/gpu_host.sh build into build-gpu (the wheel's torch,
#              TBB and oneDNN off; reused when up to date); --no-torch into
#              build-gpu-probe when that fails, so the probe's steps still run
#   policy     90, 15, 32: tests/gpu/sync_loop.py under `threadburn run --env
#              THREADBURN_CUDA_SYNC=` spin and blocking_sync, and under
#              libthreadburn_cuda_sync.so preloaded
#   nvml       45, 10, 13: tests/gpu/half_busy.py under `threadburn run`: NVML's busy share
#   waits      100, 60, ~55: `threadburn run` of a sync-bound training (sync_loop.py
#              --seconds 11 --step-ms 24): the main thread's waits on the device, their
#              CPU, advice sync-bound with the saving; and of a launch-bound one
#              (tests/gpu/launch_bound.py): advice host-bound
#   inrun      120, 75, ~65: `threadburn tune --in-run --apply` of sync_loop.py --seconds 45:
#              the CUDA wait policy changed live by block (CPU per wait under
#              blocking_sync against plain), the verdict, decided in one run
#   gputune    200, 120, ~165: `threadburn tune --points tests/gpu/tune_points.toml` of
#              sync_loop.py --seconds 3: the wait policies added after round 1, judged on
#              the steady phase, a verdict (its runs fit the step's time: 2 a setting, 8
#              runs of ~20 s, where 12 race runs do not fit)
#   node       60, 15, ~20: tests/gpu/backward_cpu.py --seconds 8 --prep under `threadburn run`
#              with CUDA_VISIBLE_DEVICES unset (a training with data prepared on the GPU first,
#              a backward pass on CUDA and a .cpu() copy each step): the process's GPUs (one,
#              its busy share the figure's), the autograd thread among the launchers, the
#              .cpu() copies as hidden waits, the steady phase from the first step
#   classes    60, 10, 16: examples/mnist_adadelta.py --device cuda --feed loader --workers 2
#              --pin-memory under `threadburn run`: CPU by class, the GPU's share
#   busy       60, 15, 5: tests/gpu/check_gpu_busy.py (scripts/gpu_host.sh check): gpu_busy_ms
#   sweep      110, 30, 29: `threadburn sweep configs/cuda_check.toml` into cuda-check-<gpu>.csv
# (the last three are the older checks: the deadline skips them first)
# then a table (step, check, figure, bound, PASS/FAIL/SKIP), printed last. Exit
# 0 when no row failed, 1 otherwise. The bounds and why: tests/gpu/gpu_check.py
# and docs/cuda.md ("The device check").
#
# Files: everything under --work (default runs/<run>.work: logs, each run's
# folder, the tunes' and the sweep's files), and at most 8 files under
# $OUT (default runs/<run>, <run> = gpu-check-<host>-<time>): summary.txt (the
# host, each step's time, the table), gpu-check.tar.gz (the work folder, the
# sweep's console in it), gputune-<gpu>.csv and .verdict.json, inrun-<gpu>.csv and
# .verdict.json, results/cuda-check-<gpu>.csv and .verdict.json for results/.
#
# --stand-in: no GPU. Against the stand-in CUDA driver (its simulated device)
# and NVML a build of the tests makes (--build-dir, default build:
# build/tests/fake_cuda{,_min}), the steps that can run without a GPU and
# torch.cuda do (policy, nvml, waits, inrun, gputune and node with the tests'
# device_training, classes with tests/gpu/stand_in_training.py); the others
# say SKIP. ctest gpu_check.stand_in runs it (tests/gpu/check_stand_in.py).
# GPU_CHECK_LIMIT_<step>=N replaces a step's time limit (the test's hook).
set -uo pipefail
cd "$(dirname "$0")/.."
SELF="$PWD/scripts/gpu_check.sh"

# name:limit:least - the step's time limit and the least time worth starting it with (s).
# The new checks first (waits, inrun, gputune), the older ones after them: in the default
# budget the last three have their time left when the earlier steps take what they took on
# an H200, and the deadline skips them first when they did not.
STEPS=(preflight:60:5 build:300:30 policy:90:15 nvml:45:10 waits:100:60 inrun:120:75 gputune:200:120
       node:60:15 classes:60:10 busy:60:15 sweep:110:30)
RESERVE=10   # s kept at the end for the table and the files

judge() { "$GC_TB_PY" tests/gpu/gpu_check.py "$GC_WORK/checks.tsv" "$GC_STEP" "$@"; }
state() { cat "$GC_WORK/state/$1" 2>/dev/null; }
# The python that imports torch (the preflight's choice; without it --python, else python3).
train_py() { state python || echo "${GC_PYTHON:-python3}"; }
skip_row() { judge skip --check "$1" --figure "$2" --bound "${3:-}" --result "${4:-SKIP}"; }
# The build the build step chose for the probe (probe_build) or the torch programs
# (bench_build); without that step (--steps), --build-dir or build-gpu when it holds them.
built() {
  local want=src/probe/libthreadburn_probe.so b
  [ "$1" = bench_build ] && want=bench/train_step_bench
  state "$1" && return
  for b in ${GC_BUILD:+"$GC_BUILD"} build-gpu; do [ -e "$b/$want" ] && { echo "$b"; return; }; done
  return 1
}
# The probe's build in B (the judge says SKIP when none).
probe_build() { B=$(built probe_build) || { skip_row "(step)" "no probe built (see the build step)" "a build"; return 1; }; }
# The threadburn command: bin/threadburn (Debian's /usr/bin/python3), else the same
# package under the python3 there is.
TB=(sh bin/threadburn)  # (sh, bash: nothing rests on a copy keeping the exec bits)
[ -x /usr/bin/python3 ] || TB=(env PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" python3 -m threadburn)
# threadburn run of a command (with RUN_ENV), its files in runs/NAME, its output in logs/NAME.log.
RUN_ENV=()
tb_run() {
  local name=$1; shift
  env "${RUN_ENV[@]}" "${TB[@]}" run --build-dir "$B" --exact off --no-plot --force --out "$GC_WORK/runs/$name" \
    "$@" > "$GC_WORK/logs/$name.log" 2>&1
}

# What the python that imports torch says of it (key=value lines).
TORCH_FACTS='
import torch
print("torch=" + torch.__version__)
print("torch_cuda=" + str(torch.version.cuda))
ok = torch.cuda.is_available()
print("torch_cuda_available=" + str(ok))
if ok:
    print("torch_device_name=" + torch.cuda.get_device_name(0))
    print("torch_devices=%d" % torch.cuda.device_count())
print("torch_cxx11_abi=" + str(torch._C._GLIBCXX_USE_CXX11_ABI))
print("torch_cmake=" + torch.utils.cmake_prefix_path)
'

step_preflight() {
  local d="$GC_WORK/preflight" py="" cand
  mkdir -p "$d"
  if [ "$GC_MODE" = real ]; then
    # --python, else the first of python3 and /usr/bin/python3 that imports torch.
    for cand in ${GC_PYTHON:-python3 /usr/bin/python3}; do
      if timeout 120 "$cand" -c "$TORCH_FACTS" > "$d/torch.txt" 2> "$d/torch.err"; then py=$(command -v "$cand"); break; fi
    done
    if command -v nvidia-smi >/dev/null; then
      timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1 |
        awk -F', ' '{print "gpu_name=" $1; print "driver=" $2; print "gpu_memory=" $3}' > "$d/smi.txt"
    else
      echo "nvidia_smi=absent" > "$d/smi.txt"
    fi
  fi
  py=${py:-${GC_PYTHON:-python3}}
  echo "$py" > "$GC_WORK/state/python"
  {
    echo "mode=$GC_MODE"; echo "host=$(uname -n)"; echo "cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)"; echo "kernel=$(uname -r)"
    echo "glibc=$(ldd --version 2>&1 | head -1)"; echo "gcc=$(gcc --version 2>/dev/null | head -1)"
    echo "cmake=$(cmake --version 2>/dev/null | head -1)"
    echo "nvcc=$( (nvcc --version || /usr/local/cuda/bin/nvcc --version) 2>/dev/null | tail -1)"
    echo "perf_event_paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null)"; echo "user=$(id -un)"
    echo "python=$py ($("$py" --version 2>&1))$([ -s "$d/torch.txt" ] || echo ', no torch')"
    echo "threadburn_python=$GC_TB_PY ($("$GC_TB_PY" --version 2>&1))"
    echo "commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git status --porcelain 2>/dev/null | grep -q . && echo ' (with changes)')"
  } > "$d/host.txt"
  judge preflight --mode "$GC_MODE" --dir "$d" --stand-in-dir "${GC_BUILD:-build}/tests/fake_cuda"
  cp "$d/gpu_tag" "$GC_WORK/state/gpu_tag"
  if "${TB[@]}" --help > "$GC_WORK/logs/threadburn-help.log" 2>&1; then
    skip_row "threadburn command" "${TB[*]}: $("${TB[@]}" --version 2>&1 | head -1)" "--help exits 0" PASS
  else
    skip_row "threadburn command" "${TB[*]}: $(tail -1 "$GC_WORK/logs/threadburn-help.log")" "--help exits 0" FAIL
  fi
}

# The files the later steps need, in a build made elsewhere (--build-dir, --stand-in).
build_found() {
  local b=$1 f missing=()
  local need=(src/probe/libthreadburn_probe.so src/probe/libthreadburn_cuda_sync.so)
  [ "$GC_MODE" = stand-in ] && need+=(tests/fake_cuda/libcuda.so.1 tests/fake_cuda/libnvidia-ml.so.1
                                      tests/fake_cuda/cuda_user)
  for f in "${need[@]}"; do [ -e "$b/$f" ] || missing+=("$f"); done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "$b" > "$GC_WORK/state/probe_build"
    skip_row "probe and libraries" "found in $b" "${#need[@]} files" PASS
  else
    skip_row "probe and libraries" "missing in $b: ${missing[*]}" "${#need[@]} files" FAIL
  fi
  if [ -x "$b/bench/train_step_bench" ]; then echo "$b" > "$GC_WORK/state/bench_build"; fi
}

step_build() {
  if [ -n "$GC_BUILD" ]; then build_found "$GC_BUILD"; return; fi
  command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
  local t0=$SECONDS rc torch=()
  # --torch, else the torch the preflight's python imports (else gpu_host.sh asks python3).
  local dir=${GC_TORCH:-$(sed -n 's/^torch_cmake=//p' "$GC_WORK/preflight/torch.txt" 2>/dev/null)}
  [ -n "$dir" ] && [ -d "$dir" ] && torch=(--torch "$dir")
  THREADBURN_BUILD_DIR=build-gpu bash scripts/gpu_host.sh build "${torch[@]}" > "$GC_WORK/logs/build.log" 2>&1
  rc=$?
  local torch_s=$((SECONDS - t0)) probe=build-gpu
  if [ ! -e build-gpu/src/probe/libthreadburn_probe.so ] || [ ! -e build-gpu/src/probe/libthreadburn_cuda_sync.so ]; then
    probe=build-gpu-probe
    THREADBURN_BUILD_DIR=$probe bash scripts/gpu_host.sh build --no-torch > "$GC_WORK/logs/build-no-torch.log" 2>&1
  fi
  local why
  why=$(grep -m1 -E "error:|CMake Error|FAILED|gpu_host.sh build:" "$GC_WORK/logs/build.log" | cut -c1-160)
  if [ -e "$probe/src/probe/libthreadburn_probe.so" ] && [ -e "$probe/src/probe/libthreadburn_cuda_sync.so" ]; then
    echo "$probe" > "$GC_WORK/state/probe_build"
    skip_row "probe and libraries" "in $probe ($((SECONDS - t0)) s in all)" "built" PASS
  else
    skip_row "probe and libraries" "not built: ${why:-see logs/build*.log}" "built" FAIL
  fi
  if [ $rc -eq 0 ] && [ -x build-gpu/bench/train_step_bench ]; then
    echo build-gpu > "$GC_WORK/state/bench_build"
    skip_row "train_step_bench (the wheel's torch)" "in build-gpu (${torch_s} s)" "built" PASS
  else
    skip_row "train_step_bench (the wheel's torch)" "gpu_host.sh build exited $rc: ${why:-$(tail -1 "$GC_WORK/logs/build.log")}" "built" FAIL
  fi
}

step_policy() {
  probe_build || return 0
  local py p extra=()
  py=$(train_py)
  if [ "$GC_MODE" = stand-in ]; then extra=(--stand-in); RUN_ENV=(LD_LIBRARY_PATH="$B/tests/fake_cuda"); fi
  for p in spin blocking_sync; do
    tb_run "policy-run-$p" --env THREADBURN_CUDA_SYNC=$p -- "$py" tests/gpu/sync_loop.py "${extra[@]}"
    judge policy --how run --policy $p --log "$GC_WORK/logs/policy-run-$p.log" --run-dir "$GC_WORK/runs/policy-run-$p"
  done
  for p in spin blocking_sync; do
    env "${RUN_ENV[@]}" THREADBURN_CUDA_SYNC=$p LD_PRELOAD="$B/src/probe/libthreadburn_cuda_sync.so" \
      "$py" tests/gpu/sync_loop.py "${extra[@]}" > "$GC_WORK/logs/policy-preload-$p.log" 2>&1
    judge policy --how preload --policy $p --log "$GC_WORK/logs/policy-preload-$p.log"
  done
}

step_nvml() {
  probe_build || return 0
  local extra=()
  if [ "$GC_MODE" = stand-in ]; then
    extra=(--stand-in --seconds 2 --samples-out "$GC_WORK/runs/nvml.samples.csv"); RUN_ENV=(LD_LIBRARY_PATH="$B/tests/fake_cuda")
  fi
  tb_run nvml -- "$(train_py)" tests/gpu/half_busy.py "${extra[@]}"
  judge nvml --log "$GC_WORK/logs/nvml.log" --run-dir "$GC_WORK/runs/nvml"
}

step_busy() {
  if [ "$GC_MODE" = stand-in ]; then
    skip_row "host sleep not in gpu_busy_ms" "stand-in: CUPTI's records need a GPU" "needs a CUDA device"; return
  fi
  local bench rc
  bench=$(built bench_build) || { skip_row "host sleep not in gpu_busy_ms" "no train_step_bench (see the build step)" "a build"; return; }
  THREADBURN_BUILD_DIR=$bench bash scripts/gpu_host.sh check > "$GC_WORK/logs/busy.log" 2>&1
  rc=$?
  judge busy --log "$GC_WORK/logs/busy.log" --rc $rc
}

step_classes() {
  probe_build || return 0
  local cmd
  if [ "$GC_MODE" = stand-in ]; then
    seq 100 100 20000 | sed 's/.*/0,&,40,10/' > "$GC_WORK/runs/classes.samples.csv"
    RUN_ENV=(LD_LIBRARY_PATH="$B/tests/fake_cuda" FAKE_CUDA_DRIVER_THREAD_MS=80
         FAKE_NVML_SAMPLES="$GC_WORK/runs/classes.samples.csv")
    cmd=("$(train_py)" tests/gpu/stand_in_training.py)
  else
    cmd=("$(train_py)" examples/mnist_adadelta.py --device cuda --feed loader --workers 2 --pin-memory --steps 100)
  fi
  tb_run classes -- "${cmd[@]}"
  judge classes --log "$GC_WORK/logs/classes.log" --run-dir "$GC_WORK/runs/classes"
}

# The sync-bound training's steps (ms, the startup left out): in the waits step's run and
# in a gputune run; the fixed cost of a run (its startup and exit) is measured by the first.
SYNC_MS=11000 TUNE_RUN_MS=3000
[ "${GC_MODE:-}" = stand-in ] && { SYNC_MS=3000 TUNE_RUN_MS=900; }  # device_training: its startup + steps

step_waits() {
  probe_build || return 0
  local py sync launch
  py=$(train_py)
  if [ "$GC_MODE" = stand-in ]; then
    RUN_ENV=(LD_LIBRARY_PATH="$B/tests/fake_cuda" FAKE_NVML_SAMPLES=device)
    sync=("$B/tests/fake_cuda/device_training" --kind=sync --startup-ms=1000 --steps=100)
    launch=("$B/tests/fake_cuda/device_training" --kind=launch --startup-ms=200 --kernels=400 --steps=40)
  else
    sync=("$py" tests/gpu/sync_loop.py --seconds 11 --step-ms 24)
    launch=("$py" tests/gpu/launch_bound.py --seconds 8)
  fi
  tb_run waits-sync -- "${sync[@]}"
  judge waits --what sync --log "$GC_WORK/logs/waits-sync.log" --run-dir "$GC_WORK/runs/waits-sync"
  # A run's cost less its steps (the startup, the exit): what a gputune run adds to its own steps.
  "$GC_TB_PY" -c '
import csv, sys
r = next(csv.DictReader(open(sys.argv[1])))
fixed = round(float(r["wall_ms"])) - int(sys.argv[2])
if r["status"] != "ok" or fixed <= 0:
    sys.exit(1)
print(fixed)' \
    "$GC_WORK/runs/waits-sync/run.csv" "$SYNC_MS" > "$GC_WORK/state/run_fixed_ms" 2>/dev/null ||
    rm -f "$GC_WORK/state/run_fixed_ms"
  [ "$GC_MODE" = stand-in ] && RUN_ENV+=(FAKE_CUDA_LAUNCH_US=20)  # a launch costs the host 20 us
  tb_run waits-launch -- "${launch[@]}"
  judge waits --what launch --log "$GC_WORK/logs/waits-launch.log" --run-dir "$GC_WORK/runs/waits-launch"
}

# GPU trainings as they run on real nodes (docs/cuda.md, "The process's GPUs", "Every thread
# that launches or waits", "The waits that hide", "Phases"): CUDA_VISIBLE_DEVICES unset, a
# startup of device work (data prepared on the GPU) before the steps, a backward pass on
# CUDA, a .cpu() copy each step. Stand-in: device_training on device 1 of 2 with --prep-ms,
# its launches split between the main thread and an autograd thread, its result copied
# into pageable memory each step.
step_node() {
  probe_build || return 0
  local cmd
  if [ "$GC_MODE" = stand-in ]; then
    RUN_ENV=(-u CUDA_VISIBLE_DEVICES LD_LIBRARY_PATH="$B/tests/fake_cuda" FAKE_NVML_SAMPLES=device
             FAKE_CUDA_DEVICES=2 FAKE_NVML_DEVICES=2)
    cmd=("$B/tests/fake_cuda/device_training" --device=1 --launcher=split --wait=pageable --startup-ms=200
         --prep-ms=300 --steps=50 --step-ms=20)
  else
    RUN_ENV=(-u CUDA_VISIBLE_DEVICES)
    cmd=("$(train_py)" tests/gpu/backward_cpu.py --seconds 8 --prep)
  fi
  tb_run node -- "${cmd[@]}"
  judge node --log "$GC_WORK/logs/node.log" --run-dir "$GC_WORK/runs/node"
}

# Copies the in-run control block (the probe's snapshot, its last cuCtxSetFlags result)
# while it exists: the tune removes it at its end.
watch_control() {
  local from=$1 to=$2 nap=
  trap '[ -n "$nap" ] && kill "$nap" 2>/dev/null; exit 0' TERM
  while :; do
    [ -f "$from" ] && cp "$from" "$to.tmp" 2>/dev/null && mv -f "$to.tmp" "$to"
    sleep 0.5 & nap=$!
    wait "$nap"
  done
}

step_inrun() {
  probe_build || return 0
  local tag dir out cmd args=() watcher rc
  tag=$(state gpu_tag || echo gpu)
  dir="$GC_WORK/inrun"; out="$dir/inrun-$tag.csv"
  mkdir -p "$dir"
  if [ "$GC_MODE" = stand-in ]; then
    # 20 s of 20 ms steps: the verdict comes after ~12 s, 40 blocks of 0.4 s at the most
    RUN_ENV=(LD_LIBRARY_PATH="$B/tests/fake_cuda" FAKE_NVML_SAMPLES=device)
    cmd=("$B/tests/fake_cuda/device_training" --startup-ms=1000 --steps=1000); args=(--block 0.3)
  else
    # 45 s of 24 ms steps: the verdict comes within ~40 blocks of ~0.6 s after the first wait
    cmd=("$(train_py)" tests/gpu/sync_loop.py --seconds 45 --step-ms 24)
  fi
  env LD_PRELOAD="$B/src/probe/libthreadburn_probe.so" THREADBURN_PROBE_DIR="$dir" THREADBURN_PROBE_DESCRIBE=1 true
  watch_control "$dir/.$(basename "$out").work/inrun.bin" "$dir/control.bin" &
  watcher=$!
  env "${RUN_ENV[@]}" "${TB[@]}" tune --in-run --apply --build-dir "$B" --seed 1 --force --out "$out" "${args[@]}" \
    -- "${cmd[@]}" > "$GC_WORK/logs/inrun.log" 2>&1
  rc=$?
  kill "$watcher" 2>/dev/null; wait "$watcher" 2>/dev/null
  judge inrun --log "$GC_WORK/logs/inrun.log" --csv "$out" --verdict "${out%.csv}.verdict.json" \
    --program-log "${out%.csv}.program.log" --rc $rc --control "$dir/control.bin" --describe "$dir/describe.json"
}

# The tune's runs for the step's seconds and a run's expected ms (a run: that x 1.2 + 2 s):
# its 12 race runs (the first round plain alone, then plain and the 3 policies to 3 runs
# each; tune runs them whatever its --budget) and 12 fresh ones when they fit; else
# the 12 race runs alone; else a fixed design of 2 runs a setting (8 runs; the rule's
# least). Prints the plan's name, then tune's arguments.
gputune_plan() {
  local seconds=$1 per
  per=$(awk -v ms="$2" 'BEGIN { printf "%d", ms / 1000 * 1.2 + 2.499 }')
  if [ $((24 * per + 20)) -le "$seconds" ]; then echo "confirmed --budget 24"
  elif [ $((12 * per + 20)) -le "$seconds" ]; then echo "race --budget 12 --confirm 0"
  else echo "fixed --repetitions 2 --confirm 0"; fi
}

step_gputune() {
  probe_build || return 0
  local tag out cmd fixed plan args targs=() t0 secs
  tag=$(state gpu_tag || echo gpu)
  out="$GC_WORK/gputune/gputune-$tag.csv"
  mkdir -p "$GC_WORK/gputune"
  if [ "$GC_MODE" = stand-in ]; then
    RUN_ENV=(LD_LIBRARY_PATH="$B/tests/fake_cuda" FAKE_NVML_SAMPLES=device)
    cmd=("$B/tests/fake_cuda/device_training" --startup-ms=300 --steps=30); fixed=$(state run_fixed_ms || echo 500)
  else
    cmd=("$(train_py)" tests/gpu/sync_loop.py --seconds 3 --step-ms 24); fixed=$(state run_fixed_ms || echo 16000)
  fi
  read -r plan args <<< "$(gputune_plan "$GC_STEP_SECONDS" $((fixed + TUNE_RUN_MS)))"
  read -ra targs <<< "$args"
  echo "  gputune: plan $plan: $args (a run about $(((fixed + TUNE_RUN_MS + 500) / 1000)) s; step limit ${GC_STEP_SECONDS} s)"
  t0=$(date +%s%N)
  env "${RUN_ENV[@]}" "${TB[@]}" tune --build-dir "$B" --points tests/gpu/tune_points.toml --seed 1 --force \
    --out "$out" "${targs[@]}" -- "${cmd[@]}" > "$GC_WORK/logs/gputune.log" 2>&1
  secs=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
  judge gputune --log "$GC_WORK/logs/gputune.log" --csv "$out" --verdict "${out%.csv}.verdict.json" \
    --seconds "$secs" --plan "plan $plan: $args"
}

step_sweep() {
  if [ "$GC_MODE" = stand-in ]; then
    skip_row "configs/cuda_check.toml" "stand-in: every row would be 'skipped: no CUDA device'" "needs a CUDA device"
    return
  fi
  local bench tag out
  bench=$(built bench_build) || { skip_row "configs/cuda_check.toml" "no train_step_bench (see the build step)" "a build"; return; }
  tag=$(state gpu_tag || echo gpu)
  out="$GC_WORK/results/cuda-check-$tag.csv"
  mkdir -p "$GC_WORK/results"
  "${TB[@]}" sweep configs/cuda_check.toml --build-dir "$bench" --out "$out" --force --no-plot --seed 1 \
    > "$GC_WORK/logs/sweep.log" 2>&1
  cp "$GC_WORK/logs/sweep.log" "${out%.csv}.txt"
  judge sweep --log "$GC_WORK/logs/sweep.log" --csv "$out" --verdict "${out%.csv}.verdict.json"
}

# Kills what a step left running (its processes carry GC_TOKEN in their environment), and
# returns once none is left: scanned again after each round of kills, since a process may
# fork between the scan and its kill, and a killed one keeps its environment readable until
# it has let go of its memory (a zombie's reads empty). At most 50 rounds of 0.1 s.
reap() {
  local token=$1 f pid round pids killed=" "
  for round in $(seq 50); do
    pids=()
    for f in $(grep -l -z -x "GC_TOKEN=$token" /proc/[0-9]*/environ 2>/dev/null); do
      pid=${f#/proc/}; pids+=("${pid%/environ}")
    done
    [ ${#pids[@]} -eq 0 ] && break
    for pid in "${pids[@]}"; do
      kill -KILL "$pid" 2>/dev/null && [[ "$killed" != *" $pid "* ]] && killed+="$pid "
    done
    sleep 0.1
  done
  set -- $killed
  [ $# -eq 0 ] || echo "  ($# leftover process(es) of step ${token##*.} killed)"
  [ ${#pids[@]} -eq 0 ] || echo "  (${#pids[@]} process(es) of step ${token##*.} still there after 5 s: ${pids[*]})"
}

# One step under min(its limit, the time left), in a process of its own.
run_step() {
  local name=$1 limit=$2 least=$3 over left t t0 rc secs
  over="GPU_CHECK_LIMIT_$name"; limit=${!over:-$limit}
  GC_STEP=$name
  if [[ ",$GC_ONLY," != *",$name,"* ]]; then
    skip_row "(step)" "not asked (--steps $GC_ONLY)" ""; printf '%s\t%s\t-\tnot asked\n' "$name" "$limit" >> "$GC_WORK/steps.tsv"
    return
  fi
  left=$((GC_DEADLINE - $(date +%s) - RESERVE))
  if [ $left -lt "$least" ]; then
    skip_row "(step)" "out of time: ${left} s left before the deadline" ">= ${least} s to start"
    printf '%s\t%s\t-\tskipped: out of time\n' "$name" "$limit" >> "$GC_WORK/steps.tsv"
    return
  fi
  t=$((limit < left ? limit : left))
  echo "== $name (limit ${t} s)"
  t0=$(date +%s%N)
  GC_TOKEN="$GC_RUN.$name" GC_STEP_SECONDS=$t timeout -k 5 "$t" bash "$SELF" __step "$name" > "$GC_WORK/logs/$name.txt" 2>&1
  rc=$?
  reap "$GC_RUN.$name" >> "$GC_WORK/logs/$name.txt"
  secs=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
  cat "$GC_WORK/logs/$name.txt"
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    skip_row "(step)" "timed out after ${t} s" "<= ${limit} s" FAIL
  elif [ $rc -ne 0 ]; then
    skip_row "(step)" "exited $rc: $(tail -1 "$GC_WORK/logs/$name.txt" | cut -c1-160)" "exit 0" FAIL
  fi
  printf '%s\t%s\t%s\t%s\n' "$name" "$limit" "$secs" "$( [ $rc -eq 0 ] && echo done || echo "exit $rc")" >> "$GC_WORK/steps.tsv"
  echo "   $name: ${secs} s"
}

# summary.txt, the tarball, the tunes' files and the sweep's for results/ into $DEST (at most 8 files).
finish() {
  local tag table rc parent base
  tag=$(state gpu_tag || echo gpu)
  table=$(GC_STEP=- judge table); rc=$?
  {
    echo "threadburn device check: run $GC_RUN ($GC_MODE), budget ${GC_BUDGET} s, $(( $(date +%s) - GC_START )) s in all"
    cat "$GC_WORK/preflight/facts.txt" 2>/dev/null
    echo; echo "steps (s):"
    awk -F'\t' 'BEGIN { printf "  %-10s %6s %8s  %s\n", "step", "limit", "took", "outcome" }
                 { printf "  %-10s %6s %8s  %s\n", $1, $2, $3, $4 }' "$GC_WORK/steps.tsv"
    echo; echo "$table"
  } > "$GC_WORK/summary.txt"
  mkdir -p "$DEST"
  cp "$GC_WORK/summary.txt" "$DEST/"
  parent=$(dirname "$GC_WORK"); base=$(basename "$GC_WORK")
  tar -czf "$DEST/gpu-check.tar.gz" -C "$parent" "$base"
  if [ "$(stat -c %s "$DEST/gpu-check.tar.gz")" -gt $((15 * 1024 * 1024)) ]; then  # $OUT takes 16 MiB a file
    tar -czf "$DEST/gpu-check.tar.gz" -C "$parent" --exclude='*.timeline.csv' --exclude='*.threads' "$base"
  fi
  for f in "$GC_WORK"/gputune/gputune-"$tag".{csv,verdict.json} "$GC_WORK"/inrun/inrun-"$tag".{csv,verdict.json}; do
    [ -f "$f" ] && cp "$f" "$DEST/"
  done
  for f in "$GC_WORK/results/cuda-check-$tag".{csv,verdict.json}; do  # (its .txt: in the tarball)
    [ -f "$f" ] && mkdir -p "$DEST/results" && cp "$f" "$DEST/results/"
  done
  echo
  echo "files: $DEST/ ($(cd "$DEST" && find . -type f | sed 's|^\./||' | sort | tr '\n' ' ')); work: $GC_WORK"
  echo "$table"
  return $rc
}

usage() { sed -n '2,/^set -uo/p' "$SELF" | sed '$d'; exit 2; }

main() {
  local stand_in=0 build="" budget=530 work="" python="" only="" torch="" spec
  while [ $# -gt 0 ]; do
    case "$1" in
      --stand-in) stand_in=1; shift ;;
      --build-dir) build=$2; shift 2 ;;
      --budget-s) budget=$2; shift 2 ;;
      --work) work=$2; shift 2 ;;
      --python) python=$2; shift 2 ;;
      --torch) torch=$2; shift 2 ;;
      --steps) only=$2; shift 2 ;;
      -h|--help) usage ;;
      *) echo "gpu_check.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
    esac
  done
  [[ "$budget" =~ ^[0-9]+$ ]] || { echo "gpu_check.sh: --budget-s $budget: expected seconds" >&2; exit 2; }
  local all s
  all=$(printf '%s\n' "${STEPS[@]}" | cut -d: -f1 | paste -sd,)
  for s in ${only//,/ }; do
    [[ ",$all," == *",$s,"* ]] || { echo "gpu_check.sh: --steps: no step '$s' (steps: $all)" >&2; exit 2; }
  done
  export GC_MODE=real GC_BUILD=$build GC_PYTHON=$python GC_TORCH=$torch GC_BUDGET=$budget GC_START
  GC_START=$(date +%s)
  [ $stand_in -eq 1 ] && { GC_MODE=stand-in; GC_BUILD=${build:-build}; GC_PYTHON=${python:-/usr/bin/python3}; }
  export GC_RUN="gpu-check-$(uname -n | cut -d. -f1)-$(date +%Y%m%d-%H%M%S)"
  export GC_WORK GC_DEADLINE=$((GC_START + budget)) GC_ONLY=${only:-$all}
  GC_WORK=$(realpath -m "${work:-runs/$GC_RUN.work}")
  DEST=$(realpath -m "${OUT:-runs/$GC_RUN}")
  export GC_TB_PY=/usr/bin/python3
  [ -x "$GC_TB_PY" ] || GC_TB_PY=$(command -v python3)
  rm -rf "$GC_WORK"; mkdir -p "$GC_WORK"/{logs,runs,state}; : > "$GC_WORK/checks.tsv"; : > "$GC_WORK/steps.tsv"
  echo "gpu_check: run $GC_RUN ($GC_MODE), budget ${budget} s, work $GC_WORK, files $DEST"
  for spec in "${STEPS[@]}"; do
    IFS=: read -r name limit least <<< "$spec"
    run_step "$name" "$limit" "$least"
  done
  finish
}

if [ "${1:-}" = __step ]; then
  GC_STEP=$2
  "step_$2"
  exit $?
fi
main "$@"
