#!/usr/bin/env bash
# Runs threadburn on a GPU host that has a CUDA-enabled PyTorch but no package
# registry. Two steps:
#
#   here (Debian 12, with apt):   scripts/gpu_host.sh bundle [OUT.tar.gz]
#       packs the source tree (git archive HEAD) and Debian's Google Benchmark
#       and GoogleTest unpacked with dpkg -x (they need only libc/libstdc++).
#   on the GPU host:              scripts/gpu_host.sh build [--torch DIR] [--deps DIR]
#       configures against the CUDA libtorch (DIR = the share/cmake folder of
#       an installed wheel, default: python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
#       with TBB and oneDNN off (the wheel links its own oneDNN statically),
#       builds into build-gpu/, and prints the commands to run.
set -euo pipefail
cd "$(dirname "$0")/.."

DEBS=(libbenchmark-dev libbenchmark1debian libgtest-dev)

bundle() {
  local out=${1:-threadburn-gpu-host.tar.gz}
  local stage
  stage=$(mktemp -d)
  git archive --format=tar --prefix=threadburn/ HEAD | tar -x -C "$stage"
  mkdir -p "$stage/threadburn/deps" "$stage/debs"
  (cd "$stage/debs" && apt-get download "${DEBS[@]}" >/dev/null)
  for deb in "$stage"/debs/*.deb; do dpkg -x "$deb" "$stage/threadburn/deps"; done
  tar -czf "$out" -C "$stage" threadburn
  rm -rf "$stage"
  echo "bundle: $out ($(du -h "$out" | cut -f1)); on the GPU host:"
  echo "  tar xzf $(basename "$out") && cd threadburn && scripts/gpu_host.sh build"
}

build() {
  local torch="" deps="$PWD/deps"
  while [ $# -gt 0 ]; do
    case "$1" in
      --torch) torch=$2; shift 2 ;;
      --deps) deps=$2; shift 2 ;;
      *) echo "gpu_host.sh build: unknown argument '$1'" >&2; exit 2 ;;
    esac
  done
  if [ -z "$torch" ]; then
    torch=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null) || {
      echo "gpu_host.sh build: no --torch given and 'import torch' failed" >&2; exit 2; }
  fi
  [ -d "$torch" ] || { echo "gpu_host.sh build: --torch $torch: no such directory" >&2; exit 2; }
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$torch;$deps/usr;$deps/usr/lib/x86_64-linux-gnu/cmake" \
    -DTHREADBURN_WITH_TBB=OFF -DTHREADBURN_WITH_DNNL=OFF -DTHREADBURN_WERROR=OFF
  cmake --build build-gpu -j "$(nproc)" --target train_step_bench optimizer_step_bench
  cat <<TXT
built. Try:
  build-gpu/bench/train_step_bench --device=cuda --preload=0,1 --item_sync=0,1 --gap_ms=0,100
  bin/threadburn sweep cuda --build-dir build-gpu
TXT
}

case "${1:-}" in
  bundle) shift; bundle "$@" ;;
  build) shift; build "$@" ;;
  *) sed -n '2,15p' "$0"; exit 2 ;;
esac
