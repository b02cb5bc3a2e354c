"""The command line without an interpreter start a command (helpers.threadburn).

    /usr/bin/python3 command_server.py FD

A new interpreter that imports the package's command line (python/threadburn,
as `python3 -m threadburn` does) and then forks one child per request that
comes on the socket FD (SOCK_SEQPACKET; end of file: exit). A request is one
JSON message {"argv", "env", "cwd", "umask", "warm"} with four descriptors:
the command's stdin, stdout and stderr, and a socket for the answers. The
child becomes what `bin/threadburn ARGV` starts, less the start: that
environment, working directory and umask, the three descriptors as 0, 1 and
2, sys.argv and sys.path as `python3 -m threadburn` sets them, then the
package's __main__ run and the interpreter's way out (threads, atexit, flush,
the exit code or the signal of an uncaught Ctrl-C). Nothing of a test's
reaches it: this interpreter has run no test and no command, only imports,
each made the way the command makes it ("warm": numpy, scipy.stats,
matplotlib.pyplot on Agg once a command here imported it; helpers.py then
asks for it, so each is imported once, not once a command).

Each request is answered {"pid"} at once, then (from the child)
{"imported"}: the warm modules the command imported, and {"status"}: the
child's wait status when it ended. This process reaps its children, so
their CPU time counts in its own, and the tests' (the test process waits
for this one).
"""
import json
import os
import socket
import sys

# What a warm name imports, as the package imports it (export/drawing.py: matplotlib on Agg).
WARM = {
    "numpy": ("numpy",),
    "scipy.stats": ("scipy.stats",),
    "matplotlib.pyplot": ("matplotlib", "matplotlib.pyplot"),
}


def warm(names):
    import importlib
    for name in names:
        if name not in WARM or name in sys.modules:
            continue
        for module in WARM[name]:
            importlib.import_module(module)
            if module == "matplotlib":
                sys.modules["matplotlib"].use("Agg")


def send(sock, **message):
    sock.send(json.dumps(message).encode())


def std(fd, like, write, line_buffering):
    import io
    raw = io.FileIO(fd, "w" if write else "r", closefd=False)
    buffered = io.BufferedWriter(raw) if write else io.BufferedReader(raw)
    return io.TextIOWrapper(buffered, encoding=like.encoding, errors=like.errors, line_buffering=line_buffering)


def command(request, fds):
    """In the child: `python3 -m threadburn ARGV` from here on; returns the exit code."""
    import atexit
    import runpy
    import signal
    import threading
    for i, fd in enumerate(fds):
        os.dup2(fd, i)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    # The streams a start makes: stdout block-buffered, stderr line-buffered (not a terminal).
    like_in, like_out, like_err = sys.stdin or sys.stdout, sys.stdout, sys.stderr
    sys.stdin = sys.__stdin__ = std(0, like_in, False, False)
    sys.stdout = sys.__stdout__ = std(1, like_out, True, False)
    sys.stderr = sys.__stderr__ = std(2, like_err, True, True)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    os.umask(request["umask"])
    main = os.path.join(os.path.dirname(sys.modules["threadburn"].__file__), "__main__.py")
    sys.argv = [main] + request["argv"]
    # -m: the working directory first, then $PYTHONPATH, then the interpreter's own
    sys.path[:] = [os.getcwd()] + request["env"]["PYTHONPATH"].split(os.pathsep) + BASE_PATH
    code, interrupted = 0, False
    try:
        runpy.run_module("threadburn", run_name="__main__", alter_sys=True)
    except SystemExit as e:
        code = e.code
        if code is None:
            code = 0
        elif not isinstance(code, int):
            try:
                sys.stderr.write(f"{code}\n")
            except Exception:
                pass
            code = 1
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        code, interrupted = 1, True
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    threading._shutdown()
    atexit._run_exitfuncs()
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:
            code = 120
    if interrupted:  # an uncaught Ctrl-C ends an interpreter by SIGINT
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return code & 0xFF


def serve(sock):
    """Requests until end of file, and the children until the last ended."""
    import selectors
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ)
    while len(sel.get_map()):
        for key, _ in sel.select():
            if key.data is None:  # a request, or end of file
                try:
                    data, fds, _, _ = socket.recv_fds(sock, 1 << 20, 4)
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(sock)
                    continue
                request = json.loads(data)
                warm(request["warm"])
                answer = socket.socket(fileno=fds[3])
                pid = os.fork()
                if pid == 0:
                    code = 1
                    try:
                        for other in list(sel.get_map().values()):
                            if other.data is not None:
                                other.data[1].close()
                                os.close(other.fd)
                        sel.close()
                        sock.close()
                        os.set_inheritable(answer.fileno(), False)
                        code = command(request, fds[:3])
                        send(answer, imported=[n for n in WARM if n in sys.modules])
                    finally:
                        os._exit(code)
                for fd in fds[:3]:
                    os.close(fd)
                send(answer, pid=pid)
                sel.register(os.pidfd_open(pid), selectors.EVENT_READ, (pid, answer))
            else:  # a child ended
                pid, answer = key.data
                _, status = os.waitpid(pid, 0)
                sel.unregister(key.fd)
                os.close(key.fd)
                try:
                    send(answer, status=status)
                except OSError:  # the test went (killed, or it gave up)
                    pass
                answer.close()


if __name__ == "__main__":
    control = socket.socket(fileno=int(sys.argv[1]))
    here = os.path.dirname(os.path.abspath(__file__))
    BASE_PATH = [p for p in sys.path if p not in ("", here) and p not in os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    import threadburn.cli  # noqa: F401 (what every command imports: python -m threadburn's __main__)
    serve(control)
