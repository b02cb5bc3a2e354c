#!/usr/bin/env bash
# The main job: set up and build, then run a sweep grid (default:
# configs/default.toml) into runs/, with plots, a summary and a verdict per
# workload: --decide races each workload's contenders after the grid until
# every workload is decided or the budget (default grid: 12 minutes) is spent.
#   scripts/run.sh                      the default grid
#   scripts/run.sh seed000              another grid from configs/
#   scripts/run.sh default --dry-run    any `threadburn sweep` option after the grid (it wins)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
grid=${1:-default}
[ $# -gt 0 ] && shift
budget=()
[ "$grid" = default ] && budget=(--budget 12m)
exec bin/threadburn sweep "$grid" --build-dir "${THREADBURN_BUILD_DIR:-build}" --decide "${budget[@]}" "$@"
