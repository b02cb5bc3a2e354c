#!/usr/bin/env bash
# The main job: set up and build, then run a sweep grid (default: configs/default.toml),
# writing a CSV and plots under results/ and printing a summary table.
#   scripts/run.sh                      the default grid
#   scripts/run.sh seed000              another grid from configs/
#   scripts/run.sh default --dry-run    any scripts/sweep.py flag after the grid
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
# Debian's interpreter: it has numpy/matplotlib for the plots (setup installs them).
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
grid=${1:-default}
[ $# -gt 0 ] && shift
exec "$PY" scripts/sweep.py "$grid" --build-dir "${THREADBURN_BUILD_DIR:-build}" "$@"
