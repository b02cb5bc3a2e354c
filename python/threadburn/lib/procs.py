"""Child processes of a campaign: started in their own session, killed with
the parent, described in one line when they end badly."""
import os
import signal
from datetime import datetime, timezone


def utc_now():
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def die_with_parent():
    # If the sweep is SIGKILLed, its benchmarks must not run on and skew the
    # next sweep's numbers: ask the kernel to kill them too (Linux prctl).
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Children:
    """Benchmark processes alive right now, so Ctrl-C can stop them."""
    procs = []

    @classmethod
    def kill_all(cls):
        for proc in cls.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
        cls.procs = []


def describe_exit(code):
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def last_line(path):
    try:
        with open(path, errors="replace") as f:
            lines = [ln.strip() for ln in f.read()[-4000:].splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


class Interrupt:
    """Ctrl-C that cannot get lost. Python runs its at-fork hooks (the
    logging module registers some, and scipy imports logging) in Python code
    right after each fork of a child, and an exception raised there, the
    KeyboardInterrupt of a Ctrl-C included, is printed and dropped. So the
    handler also raises a flag, and every launch checks it (check())."""
    pending = False

    @classmethod
    def install(cls):
        import signal

        def handler(signum, frame):
            cls.pending = True
            raise KeyboardInterrupt
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, handler)

    @classmethod
    def check(cls):
        if cls.pending:
            raise KeyboardInterrupt
