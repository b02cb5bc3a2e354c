"""Shared by the Python tests: the package on sys.path, a fake build dir of
fake_program.py wrappers, running bin/threadburn, reading CSVs, the real build."""
import atexit
import csv
import glob
import json
import locale
import os
import selectors
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PYTHON_DIR = os.path.join(REPO, "python")
FIXTURES = os.path.join(HERE, "fixtures")
PROGRAM_FIXTURES = os.path.join(REPO, "tests", "fixtures", "programs")
FAKE = os.path.join(HERE, "fake_program.py")
THREADBURN = os.path.join(REPO, "bin", "threadburn")
# The programs recorded in tests/fixtures/programs (<bench>.cpu.json): a fake build has them all.
BENCHES = tuple(sorted(n[:-len(".cpu.json")] for n in os.listdir(PROGRAM_FIXTURES) if n.endswith(".cpu.json")))
if PYTHON_DIR not in sys.path:
    sys.path.insert(0, PYTHON_DIR)


def make_fake_build(root):
    """root/bench/<bench>_bench: wrappers running fake_program.py BENCH."""
    bench = os.path.join(root, "bench")
    os.makedirs(bench, exist_ok=True)
    for name in BENCHES:
        path = os.path.join(bench, f"{name}_bench")
        with open(path, "w") as f:
            f.write(f"#!/bin/sh\nexec '{sys.executable}' '{FAKE}' {name} \"$@\"\n")
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return root


def fake_libomp(directory):
    """A preloadable library named libomp.so.5 (a link to the C library every
    process has loaded anyway): the fake reports llvm-libomp for it."""
    libc = None
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if os.path.basename(path).startswith("libc.so") or os.path.basename(path).startswith("libc-"):
                libc = path
                break
    if libc is None:
        raise RuntimeError("no C library in /proc/self/maps")
    link = os.path.join(directory, "libomp.so.5")
    if not os.path.lexists(link):
        os.symlink(libc, link)
    return link


def clean_env(**extra):
    """This environment without OpenMP knobs, LD_PRELOAD, the fake's switches
    or threadburn's own variables (the build dir ctest passes), plus extra."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMP_", "KMP_", "GOMP_", "FAKE_", "THREADBURN_")) and k != "LD_PRELOAD"}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def still_host(path):
    """A host's CPU counters that never move, for THREADBURN_HOST_STAT: the
    harness then sees no other load during any run, so a test whose
    programs' figures are made up follows the same course however busy the
    machine running it is (a co-running test's CPU set a run aside once)."""
    return write_file(path, "cpu  1000 0 1000 100000 0 0 0 0 0 0\n")


def threadburn_cmd(*args):
    return [THREADBURN] + [str(a) for a in args]


def threadburn(*args, env=None, timeout=120, cwd=None, launcher=False):
    """`threadburn ARGS` as a user runs it: a CompletedProcess (text) of its
    exit code, stdout and stderr. launcher=True: started by bin/threadburn;
    else, where nothing tells the two apart, a fork of an interpreter that
    has imported the package already (below)."""
    env = clean_env() if env is None else env
    if launcher or not _forkable(env):
        return subprocess.run(threadburn_cmd(*args), capture_output=True, text=True, timeout=timeout,
                              env=env, cwd=cwd, stdin=subprocess.DEVNULL)
    return _run_forked(args, env, timeout, cwd)


def write_file(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_header(path):
    with open(path, newline="") as f:
        return next(csv.reader(f))


def recording(bench, device="cpu"):
    with open(os.path.join(PROGRAM_FIXTURES, f"{bench}.{device}.json")) as f:
        return json.load(f)


def recorded_descriptions():
    """programs.Description of each recorded program with its defaults (what a
    fake build's programs describe), in the order the sweep sees them."""
    from threadburn.lib import programs
    return [programs.Description.from_json(recording(b)) for b in BENCHES]


def real_build_dir():
    """The CMake build holding the real programs ($THREADBURN_BUILD_DIR, else
    build/), or None when there is none (the drift and documentation tests skip)."""
    root = os.environ.get("THREADBURN_BUILD_DIR") or os.path.join(REPO, "build")
    paths = [p for p in glob.glob(os.path.join(root, "bench", "*_bench")) if os.access(p, os.X_OK)]
    if not paths:
        return None
    with open(paths[0], "rb") as f:
        if f.read(2) == b"#!":  # a fake build's wrapper script
            return None
    return root


class TempDir:
    """A temporary directory for a TestCase (self.tmp), removed afterwards."""

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="tb-test-")
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)


def private_cluster(script, cluster, started_by, needs_build=False):
    """(running, why not) of a private Slurm cluster that a test driver
    started in the folder `cluster` with scripts/<script> (its `status`
    answers); `started_by` names the driver for the skip reason."""
    if not cluster:
        return False, f"the cluster's folder is not set ({started_by} starts one)"
    if needs_build and not real_build_dir():
        return False, "needs the real build (scripts/build.sh)"
    status = subprocess.run(["bash", os.path.join(REPO, "scripts", script), "status", cluster],
                            capture_output=True, text=True, timeout=60)
    return status.returncode == 0, f"no {script} cluster runs in {cluster}"


def assert_one_line_error(test, result, *fragments, code=2):
    """A command that failed with exit code `code`, one line on stderr, holding fragments."""
    test.assertEqual(result.returncode, code, result.stdout + result.stderr)
    test.assertEqual(result.stderr.count("\n"), 1, result.stderr)
    for fragment in fragments:
        test.assertIn(fragment, result.stderr)


def glob_one(pattern):
    found = glob.glob(pattern)
    if len(found) != 1:
        raise AssertionError(f"{pattern}: {len(found)} matches")
    return found[0]


def typed(rows):
    """Rows read as dicts (read_rows) as the package takes them (records.Row)."""
    from threadburn.lib.records import Row
    return [Row(r) for r in rows]


# --- running the command line ------------------------------------------------
# Most tests run `threadburn ARGS` for what it prints, writes and exits with,
# not for how an interpreter starts, and a start (a new /usr/bin/python3
# importing the package, then numpy and scipy.stats for a decision,
# matplotlib for a plot) costs 0.3 to 1.5 CPU seconds: most of a short
# test's time. So threadburn() has the command run by a fork of one
# interpreter per test process that did those imports once (command_server.py):
# its own process with the exit code, output and files of a start, the given
# environment (and the PYTHONPATH bin/threadburn adds), working directory and
# umask, stdin from /dev/null, stdout and stderr read to their end, no state
# of the test's. A real start where that could differ: launcher=True (the
# tests of bin/threadburn and of how the command starts), tests run by
# another interpreter than /usr/bin/python3 (the one bin/threadburn runs), an
# environment with other values than the server's for what an interpreter or
# an imported module reads as it starts (locale, PYTHON*, matplotlib's and
# numpy's variables), or THREADBURN_TEST_REAL_STARTS=1 in the tests'
# environment (every test passes either way: the two are compared so).
COMMAND_SERVER = os.path.join(HERE, "command_server.py")
_REAL_ONLY = os.environ.get("THREADBURN_TEST_REAL_STARTS") == "1"
_READ_AT_START = ("LANG", "LANGUAGE", "HOME", "TMPDIR", "MPLBACKEND", "MPLCONFIGDIR", "PYTHONPATH",
                  "THREADBURN_PYTHON_CHOSEN")
_READ_AT_START_PREFIXES = ("LC_", "PYTHON", "XDG_", "NUMPY_", "SCIPY_", "OPENBLAS_", "MKL_", "GOTO_")
_server = {}
_server_lock = threading.Lock()


def _start_env(env):
    return {k: v for k, v in env.items() if k in _READ_AT_START or k.startswith(_READ_AT_START_PREFIXES)}


def _forkable(env):
    if _REAL_ONLY or os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3"):
        return False
    return _start_env(env) == _start_env(_server.get("env") or clean_env())


def _command_server():
    """The socket to this process's fork server, started at the first call."""
    if "sock" not in _server:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = clean_env()
        path = PYTHON_DIR + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")  # as bin/threadburn
        proc = subprocess.Popen([sys.executable, COMMAND_SERVER, str(theirs.fileno())], pass_fds=[theirs.fileno()],
                                env=dict(env, PYTHONPATH=path), cwd=HERE, stdin=subprocess.DEVNULL)
        theirs.close()
        _server.update(sock=ours, proc=proc, env=env, warm=set())
        atexit.register(_stop_command_server)
    return _server["sock"]


def _stop_command_server():
    """End of file on its socket: it waits for its children and exits; this waits for it."""
    _server.pop("sock").close()
    _server["proc"].wait()


def _run_forked(args, env, timeout, cwd):
    """subprocess.run(threadburn_cmd(*args), capture_output=True, text=True,
    timeout=timeout, env=env, cwd=cwd, stdin=DEVNULL), run by the fork server."""
    cmd = threadburn_cmd(*args)
    cwd = os.path.abspath(os.fspath(cwd)) if cwd is not None else os.getcwd()
    if not os.path.isdir(cwd):  # subprocess.run's error, raised here
        os.chdir(cwd)
    env = dict(env)
    env["PYTHONPATH"] = PYTHON_DIR + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    umask = os.umask(0o22)
    os.umask(umask)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    null = os.open(os.devnull, os.O_RDONLY)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        with _server_lock:
            sock = _command_server()
            request = {"argv": cmd[1:], "env": env, "cwd": cwd, "umask": umask, "warm": sorted(_server["warm"])}
            socket.send_fds(sock, [json.dumps(request).encode()], [null, out_w, err_w, theirs.fileno()])
    finally:
        for fd in (null, out_w, err_w):
            os.close(fd)
        theirs.close()
    pid = status = None
    chunks = {out_r: [], err_r: [], ours.fileno(): []}
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        with selectors.DefaultSelector() as sel:
            for fd in chunks:
                sel.register(fd, selectors.EVENT_READ)
            while sel.get_map():  # to the end of stdout and stderr, and the exit status
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(cmd, timeout, output=_text(chunks[out_r]),
                                                    stderr=_text(chunks[err_r]))
                for key, _ in sel.select(left):
                    if key.fd == ours.fileno():
                        data = ours.recv(1 << 16)
                        if not data:
                            sel.unregister(key.fd)
                            if status is None:
                                raise RuntimeError(f"{COMMAND_SERVER}: no exit status for {cmd}")
                            continue
                        message = json.loads(data)
                        pid = message.get("pid", pid)
                        _server["warm"].update(message.get("imported", ()))
                        if "status" in message:
                            status = message["status"]
                            sel.unregister(key.fd)
                        continue
                    data = os.read(key.fd, 1 << 16)
                    if data:
                        chunks[key.fd].append(data)
                    else:
                        sel.unregister(key.fd)
    except BaseException:
        # a timeout (subprocess.run kills the command and waits for it) or Ctrl-C in the test
        if pid is not None and status is None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            ours.settimeout(30)
            try:
                while "status" not in json.loads(ours.recv(1 << 16) or b'{"status": 0}'):
                    pass
            except (OSError, ValueError):
                pass
        raise
    finally:
        os.close(out_r)
        os.close(err_r)
        ours.close()
    return subprocess.CompletedProcess(cmd, os.waitstatus_to_exitcode(status), _text(chunks[out_r]),
                                       _text(chunks[err_r]))


def _text(chunks):
    """What subprocess's text mode makes of the bytes (the locale's encoding, universal newlines)."""
    data = b"".join(chunks).decode(locale.getpreferredencoding(False))
    return data.replace("\r\n", "\n").replace("\r", "\n")
