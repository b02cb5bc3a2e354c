#!/usr/bin/env bash
# Runs threadburn on a GPU host that has a CUDA-enabled PyTorch but no package
# registry. Two steps:
#
#   here (Debian 12, with apt):   scripts/gpu_host.sh bundle [OUT.tar.gz]
#       packs the source tree (git archive HEAD) and Debian's Google Benchmark
#       and GoogleTest unpacked with dpkg -x (they need only libc/libstdc++);
#       scripts/gpu_host.sh deps [DIR] unpacks only those into DIR (default deps/),
#       for a checkout that travels to the GPU host by other means.
#   on the GPU host:              scripts/gpu_host.sh build [--torch DIR | --no-torch] [--deps DIR]
#       configures against the CUDA libtorch (DIR = the share/cmake folder of
#       an installed wheel, default: python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
#       with TBB and oneDNN off (the wheel links its own oneDNN statically),
#       builds into build-gpu/ (THREADBURN_BUILD_DIR) the CUDA programs, the
#       probe and the monitor, and prints the commands to run. --no-torch:
#       the probe and the monitor only (no libtorch needed), all that
#       `threadburn run` and `tune` of your own training need.
#                                 scripts/gpu_host.sh check
#       the GPU figures' known answer on that build (tests/gpu/check_gpu_busy.py).
#   scripts/gpu_check.sh runs build, check and the rest of the GPU path's checks
#   in one command (docs/cuda.md, "The device check").
set -euo pipefail
cd "$(dirname "$0")/.."

DEBS=(libbenchmark-dev libbenchmark1debian libgtest-dev)

BUILD_DIR=${THREADBURN_BUILD_DIR:-build-gpu}

# Debian's Google Benchmark and GoogleTest, unpacked into $1.
deps() {
  local into debs
  into=$(realpath -m "${1:-deps}")
  debs=$(mktemp -d)
  mkdir -p "$into"
  (cd "$debs" && apt-get download "${DEBS[@]}" >/dev/null)
  for deb in "$debs"/*.deb; do dpkg -x "$deb" "$into"; done
  rm -rf "$debs"
  echo "deps: ${DEBS[*]} in $into"
}

bundle() {
  local out=${1:-threadburn-gpu-host.tar.gz}
  local stage
  stage=$(mktemp -d)
  git archive --format=tar --prefix=threadburn/ HEAD | tar -x -C "$stage"
  deps "$stage/threadburn/deps" >/dev/null
  tar -czf "$out" -C "$stage" threadburn
  rm -rf "$stage"
  echo "bundle: $out ($(du -h "$out" | cut -f1)); on the GPU host:"
  echo "  tar xzf $(basename "$out") && cd threadburn && scripts/gpu_host.sh build"
}

build() {
  local torch="" deps="$PWD/deps" with_torch=ON
  while [ $# -gt 0 ]; do
    case "$1" in
      --torch) torch=$2; shift 2 ;;
      --no-torch) with_torch=OFF; shift ;;
      --deps) deps=$2; shift 2 ;;
      *) echo "gpu_host.sh build: unknown argument '$1'" >&2; exit 2 ;;
    esac
  done
  local targets=(threadburn_probe threadburn_phase threadburn_cuda_sync threadburn_monitor)
  if [ "$with_torch" = ON ]; then
    if [ -z "$torch" ]; then
      torch=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null) || {
        echo "gpu_host.sh build: no --torch given and 'import torch' failed (--no-torch builds without it)" >&2
        exit 2; }
    fi
    [ -d "$torch" ] || { echo "gpu_host.sh build: --torch $torch: no such directory" >&2; exit 2; }
    targets+=(train_step_bench optimizer_step_bench)
  fi
  deps=$(realpath -m "$deps")  # absent: Google Benchmark and GoogleTest as the host has them
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$torch;$deps/usr;$deps/usr/lib/x86_64-linux-gnu/cmake" \
    -DTHREADBURN_WITH_TORCH=$with_torch -DTHREADBURN_WITH_TBB=OFF -DTHREADBURN_WITH_DNNL=OFF -DTHREADBURN_WERROR=OFF
  # Make's -k: a torch program that fails to compile still leaves the probe built
  # (all that run and tune of a user's training need); the exit status still fails.
  local keep_going=()
  [ -f "$BUILD_DIR/Makefile" ] && keep_going=(-- -k)
  cmake --build "$BUILD_DIR" -j "$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)" --target "${targets[@]}" "${keep_going[@]}"
  echo "built in $BUILD_DIR: ${targets[*]}. Try:"
  if [ "$with_torch" = ON ]; then
    cat <<TXT
  $BUILD_DIR/bench/train_step_bench --device=cuda --preload=0,1 --item_sync=0,1 --gap_ms=0,100
  bin/threadburn sweep cuda --build-dir $BUILD_DIR
  scripts/gpu_host.sh check           # gpu_busy_ms's known answer
TXT
  fi
  echo "  bin/threadburn run --build-dir $BUILD_DIR -- python3 train.py"
}

check() {
  "$(command -v /usr/bin/python3 || command -v python3)" tests/gpu/check_gpu_busy.py \
    --program "$BUILD_DIR/bench/train_step_bench" "$@"
}

case "${1:-}" in
  bundle) shift; bundle "$@" ;;
  deps) shift; deps "$@" ;;
  build) shift; build "$@" ;;
  check) shift; check "$@" ;;
  *) sed -n '2,21p' "$0"; exit 2 ;;
esac
