"""The client of tests/cpp/fork_server.c: a real program started once with the
fork server preloaded, then each command line run in a child forked from it
after the static initialisers (libtorch's: about 0.6 s of CPU a start), before
main. A case gives what a fresh start gives: (exit code, stdout, stderr), the
exit code as subprocess gives it (-N for a death by signal N); the server's own
comment says what differs (the exit handlers do not run; they print nothing
in these programs) and test_fake_matches_programs.py compares cases with fresh
starts.
"""
import os
import select
import shutil
import signal
import subprocess
import tempfile

LIBRARY = "libthreadburn_fork_server.so"
MANY_THREADS = "more than one thread before main"  # the server's refusal (fork_server.c)


def library(build_dir):
    """The fork server of a build (tests/cpp), or None when it was not built."""
    path = os.path.join(build_dir, "tests", "cpp", LIBRARY)
    return path if os.path.exists(path) else None


class ForkServer:
    def __init__(self, program, preload, env, timeout=120):
        self.program, self.timeout = program, timeout
        self.tmp = tempfile.mkdtemp(prefix="tb-fork-server-")
        self.log = os.path.join(self.tmp, "server.log")
        req_r, self.req_w = os.pipe()
        self.rep_r, rep_w = os.pipe()
        env = dict(env, LD_PRELOAD=preload, THREADBURN_FORK_SERVER=f"{req_r},{rep_w}")
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen([program], env=env, pass_fds=(req_r, rep_w), stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=log, start_new_session=True)
        os.close(req_r)
        os.close(rep_w)
        self.replies = b""

    def _fail(self, what):
        with open(self.log, errors="replace") as f:
            output = f.read()
        self.close(kill=True)
        raise RuntimeError(f"fork server of {self.program}: {what}; its output: {output[-2000:]!r}")

    def _reply(self):
        while b"\n" not in self.replies:
            ready, _, _ = select.select([self.rep_r], [], [], self.timeout)
            if not ready:
                self._fail(f"no answer in {self.timeout} s")
            chunk = os.read(self.rep_r, 64)
            if not chunk:
                self._fail(f"it ended (exit code {self.proc.wait()})")
            self.replies += chunk
        line, self.replies = self.replies.split(b"\n", 1)
        return os.waitstatus_to_exitcode(int(line))

    def run(self, args):
        """(exit code, stdout, stderr) of `program args...` in a forked child."""
        out, err = os.path.join(self.tmp, "stdout"), os.path.join(self.tmp, "stderr")
        fields = [str(len(args)), *args, out, err]
        request = b"".join(os.fsencode(f) + b"\0" for f in fields)
        try:
            os.write(self.req_w, request)
        except BrokenPipeError:
            self._fail(f"it ended (exit code {self.proc.wait()})")
        code = self._reply()
        with open(out, errors="surrogateescape") as o, open(err, errors="surrogateescape") as e:
            return code, o.read(), e.read()

    def close(self, kill=False):
        """Ends the server; raises when it printed anything of its own (a
        static initialiser's output a fresh start would have shown) or failed."""
        if self.proc is None:
            return
        os.close(self.req_w)
        os.close(self.rep_r)
        proc, self.proc = self.proc, None
        if kill:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the server and a case's child, if one hangs
            except ProcessLookupError:
                pass  # both gone already
        code = proc.wait()
        with open(self.log, errors="replace") as f:
            output = f.read()
        shutil.rmtree(self.tmp, ignore_errors=True)
        if not kill and (code != 0 or output):
            raise RuntimeError(f"fork server of {self.program}: exit code {code}, output {output[-2000:]!r}")
