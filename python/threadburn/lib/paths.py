"""Where things are: the checkout or the installed tree, the build's programs
and libraries (the probe, the CUDA wait-policy library), the folder for user
runs, the LLVM OpenMP runtime.

Programs (and the probe library) are found in, first match wins:
$THREADBURN_PROGRAMS (a folder), the installed libexec folder (named in
_installed.py, which `cmake --install` and cpack write), then
<checkout>/<build dir>/bench, src/monitor and src/probe, the build dir being
$THREADBURN_BUILD_DIR or "build".

_installed.py holds the installed folders relative to this package, not
absolute: the same tree then works wherever it lies (a --prefix, /usr from the
.deb, or a `dpkg -x` root).

Every path handed to another process (the probe and the libraries in
LD_PRELOAD, the probe's folder, the programs, the monitor) is absolute
(for_child): the user's command may change directory (`sh -c 'cd data &&
python3 train.py'`), and a relative LD_PRELOAD entry or probe folder would then
be looked up from there: not preloaded, the process unprobed. A build dir
given relative (--build-dir build, $THREADBURN_BUILD_DIR) is taken from the
folder threadburn was started in.
"""
import glob
import os

from .errors import ThreadburnError

# The package root (python/threadburn): this file is in its lib/.
PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(os.path.dirname(PACKAGE))
LIBOMP = "/usr/lib/x86_64-linux-gnu/libomp.so.5"
# threadburn's CUDA wait-policy library (installed beside the probe) and the variable it
# and the probe read (a row of knobs.tsv; docs/cuda.md): preloaded with the variable, it
# sets the policy before the program's first CUDA call, with or without threadburn.
CUDA_SYNC_LIBRARY = "libthreadburn_cuda_sync.so"
CUDA_SYNC = "THREADBURN_CUDA_SYNC"
# The suffix of every benchmark program; the grids' `bench` is the name before it.
PROGRAM_SUFFIX = "_bench"

try:
    from .. import _installed
    INSTALLED_LIBEXEC = os.path.normpath(os.path.join(PACKAGE, _installed.LIBEXEC))
    INSTALLED_DATA = os.path.normpath(os.path.join(PACKAGE, _installed.DATA))
    INSTALLED_BIN = os.path.normpath(os.path.join(PACKAGE, _installed.BIN))
except ImportError:
    INSTALLED_LIBEXEC = INSTALLED_DATA = INSTALLED_BIN = None


def data_dir():
    """configs/, docs/ and results/ of the checkout, or their installed copy."""
    return INSTALLED_DATA or REPO


def configs_dir():
    return os.path.join(data_dir(), "configs")


def for_child(path):
    """path as another process must get it: absolute, from the folder threadburn
    runs in (the --libomp, --out and --build-dir a user gives are files and
    folders there; the existence checks look there too)."""
    return os.path.abspath(path) if path else path


def build_dir(override=None):
    return for_child(override or os.environ.get("THREADBURN_BUILD_DIR") or os.path.join(REPO, "build"))


def program_dirs(build=None):
    dirs = []
    if os.environ.get("THREADBURN_PROGRAMS"):
        dirs.append(for_child(os.environ["THREADBURN_PROGRAMS"]))
    if build is None and INSTALLED_LIBEXEC:
        dirs.append(INSTALLED_LIBEXEC)
        if not os.environ.get("THREADBURN_BUILD_DIR"):
            return dirs  # an installed tree has no build/ beside it
    root = build_dir(build)
    dirs += [os.path.join(root, "bench"), os.path.join(root, "src", "monitor"), os.path.join(root, "src", "probe")]
    return dirs


def command():
    """The threadburn command itself (what a Slurm task runs)."""
    return os.path.join(INSTALLED_BIN or os.path.join(REPO, "bin"), "threadburn")


def find_program(name, build=None):
    """Path of an executable the build made (e.g. "threadburn_monitor")."""
    return _find(name, build, os.X_OK)


def find_library(name, build=None):
    """Path of a shared library the build made (the preload probe). Readable is
    enough: the loader maps it, nobody executes it, and installed libraries
    need not have the execute bit (CMake on Debian installs them 0644)."""
    return _find(name, build, os.R_OK)


def _find(name, build, mode):
    for d in program_dirs(build):
        path = os.path.join(d, name)
        if os.path.isfile(path) and os.access(path, mode):
            return path
    raise ThreadburnError(f"{name}: not found in {', '.join(program_dirs(build))}; build first "
                          "(scripts/build.sh) or pass --build-dir")


def cuda_sync_library(build=None):
    """Path of libthreadburn_cuda_sync.so, found as the probe is."""
    return find_library(CUDA_SYNC_LIBRARY, build)


def benchmark_programs(build=None):
    """{bench name: path} of every benchmark program of the first folder that has any."""
    for d in program_dirs(build):
        found = sorted(glob.glob(os.path.join(d, "*" + PROGRAM_SUFFIX)))
        found = [p for p in found if os.access(p, os.X_OK)]
        if found:
            return {os.path.basename(p)[:-len(PROGRAM_SUFFIX)]: p for p in found}
    raise ThreadburnError(f"no benchmark programs (*{PROGRAM_SUFFIX}) in {', '.join(program_dirs(build))}; "
                          "build first (scripts/build.sh) or pass --build-dir")


def runs_dir():
    """User runs go here, never into results/ (committed references only)."""
    return os.environ.get("THREADBURN_RUNS") or os.path.join(REPO if INSTALLED_DATA is None else os.getcwd(), "runs")


def work_dir(out):
    """A tune's hidden work folder beside its results file `out` (.<name>.work): its runs' files."""
    return os.path.join(os.path.dirname(os.path.abspath(out)), "." + os.path.basename(out) + ".work")
