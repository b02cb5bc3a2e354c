"""The interpreter the command runs under.

bin/threadburn starts Debian's /usr/bin/python3 on purpose: numpy and scipy
(the decision rule's distributions) come to it from apt. A host may have them
only in another python3: a GPU host whose PyTorch wheel lives in a virtual
environment with numpy and scipy, and whose /usr/bin/python3 has neither (the
first device check on an H200 stopped there). Before anything imports scipy,
`python3 -m threadburn` checks that it can; if not, it starts itself again
under the first interpreter that can: $THREADBURN_PYTHON, then each python3 on
PATH in order, then /usr/bin/python3. `threadburn --version` and `threadburn
doctor` say which one runs.
"""
import importlib.util
import os
import subprocess
import sys

ENV = "THREADBURN_PYTHON"
_AGAIN = "THREADBURN_PYTHON_CHOSEN"  # set for the second start only: never a third
# The interpreter the second start was chosen over (taken out of the environment
# here, so nothing the command starts inherits it).
_chosen_over = os.environ.pop(_AGAIN, "")


def has_scipy(python):
    """Whether `python` can import scipy (without importing it: a few ms)."""
    try:
        return subprocess.run(
            [python, "-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec('scipy') is None)"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def candidates():
    """$THREADBURN_PYTHON, each python3 on PATH, /usr/bin/python3: by their paths, not
    where their links lead (a virtual environment's python3 links to the system's and
    differs from it only by where it is)."""
    seen = set()
    listed = [os.environ.get(ENV, "")]
    listed += [os.path.join(d or ".", "python3") for d in os.environ.get("PATH", "").split(os.pathsep)]
    listed.append("/usr/bin/python3")
    for p in listed:
        if not p:
            continue
        p = os.path.abspath(p)
        if p not in seen and os.path.isfile(p) and os.access(p, os.X_OK):
            seen.add(p)
            yield p


def ensure_scipy():
    """Return when this interpreter has scipy; else exec the package under the
    first candidate that has it; else exit 2 with what was tried."""
    if importlib.util.find_spec("scipy") is not None:
        return
    me = os.path.abspath(sys.executable)
    tried = [me]
    if not _chosen_over:
        for p in candidates():
            if p == me:
                continue
            tried.append(p)
            if has_scipy(p):
                package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
                path = os.environ.get("PYTHONPATH", "")
                if package_root not in path.split(os.pathsep):
                    os.environ["PYTHONPATH"] = package_root + (os.pathsep + path if path else "")
                os.environ[_AGAIN] = me
                sys.stdout.flush()
                os.execv(p, [p, "-m", "threadburn"] + sys.argv[1:])
    sys.stderr.write(
        f"threadburn: error: no python3 here imports scipy (tried {', '.join(tried)}): "
        f"apt install python3-scipy, or set {ENV} to a python3 that has it\n")
    sys.exit(2)


def describe():
    """One line: this interpreter, its version, scipy's and why it was chosen."""
    try:
        import scipy
        sci = f"scipy {scipy.__version__}"
    except ImportError:
        sci = "no scipy"
    why = f" (chosen because {_chosen_over} has no scipy)" if _chosen_over else ""
    return f"{sys.executable} (Python {sys.version.split()[0]}, {sci}){why}"
