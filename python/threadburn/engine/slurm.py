"""Slurm's client commands, as a sweep needs them: submit a job array, read the
state of each of its tasks, cancel, and wait until every task has ended.

Standard library only; it knows nothing of the rest of threadburn. Every
command runs with a timeout (COMMAND_TIMEOUT_S); a command that is not on PATH,
fails, or does not answer raises SlurmError, whose str() is one line.

``env`` arguments: variables set on top of os.environ for the commands, e.g.
{"SLURM_CONF": "/tmp/threadburn-slurm/slurm.conf"} for the local cluster of
scripts/local_slurm.sh. sbatch exports its environment into the job, so they
reach the job script too.

Where task states come from (array_states):
  * ``squeue -t all -r``: pending and running tasks, and finished ones while
    slurmctld still holds them (MinJobAge seconds after they end: 300 by
    default, 3600 on the local cluster).
  * For finished tasks slurmctld has forgotten, the completion record, found
    through ``scontrol show config``: ``sacct`` where accounting storage is
    configured (a production cluster), else the job completion file when
    JobCompType=jobcomp/filetxt (the local cluster: DIR/jobcomp.txt, one line
    per finished job, with ArrayJobId= and ArrayTaskId=). squeue's state wins
    where both know a task.
    Tasks cancelled before they ever started are not split off the array job:
    sacct shows them as one "JOB_[2-5]" line (expanded here), the jobcomp file
    as one line for JobId=JOB without ArrayTaskId, which names no tasks; that
    state is given to the tasks 0..n_tasks-1 without a record of their own
    when n_tasks is known (array_states(..., n_tasks=N), wait()).
"""
import os
import re
import shutil
import subprocess
import time

COMMAND_TIMEOUT_S = 60.0

# States after which a task will not run again.
DONE_STATES = frozenset({"COMPLETED"})
FAILED_STATES = frozenset({
    "BOOT_FAIL", "CANCELLED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY",
    "PREEMPTED", "REVOKED", "SPECIAL_EXIT", "TIMEOUT",
})
FINAL_STATES = DONE_STATES | FAILED_STATES
# States of a task that holds its resources (started, or ending).
RUNNING_STATES = frozenset({
    "COMPLETING", "CONFIGURING", "RESIZING", "RUNNING", "SIGNALING", "STAGE_OUT",
    "STOPPED", "SUSPENDED",
})
# Anything else (PENDING, REQUEUED, REQUEUE_HOLD, ...) counts as pending.

_INSTALL_HINT = "install slurm-wlm, or run where Slurm's client commands are"


class SlurmError(Exception):
    """A Slurm command is missing, failed, refused or did not answer."""

    def __init__(self, message):
        super().__init__(" ".join(str(message).split()))


def _environment(env):
    merged = dict(os.environ)
    if env:
        merged.update({k: str(v) for k, v in env.items()})
    return merged


def _last_line(text):
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _own_message(command, stderr, stdout=""):
    """The last line a command printed on stderr (else stdout), without the
    "sbatch: error: " style prefix."""
    line = _last_line(stderr) or _last_line(stdout)
    return re.sub(rf"^{re.escape(command)}:\s*(error|fatal|warning):\s*", "", line)


def _run(argv, env=None, cwd=None, ok=None):
    """Run a Slurm client command; its stdout. ok(returncode, stderr) may
    accept a non-zero exit (then stdout is returned as well)."""
    command = argv[0]
    merged = _environment(env)
    path = shutil.which(command, path=merged.get("PATH", os.defpath))
    if path is None:
        raise SlurmError(f"{command}: not found on PATH ({_INSTALL_HINT})")
    try:
        proc = subprocess.run([path, *argv[1:]], env=merged, cwd=cwd, text=True,
                              stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{command} did not answer within {COMMAND_TIMEOUT_S:g} s "
                         "(is slurmctld running?)") from None
    except OSError as e:
        raise SlurmError(f"{command}: cannot run {path}: {e.strerror or e}") from None
    if proc.returncode != 0 and not (ok and ok(proc.returncode, proc.stderr)):
        message = _own_message(command, proc.stderr, proc.stdout) or "no message"
        if command == "sbatch":
            raise SlurmError(f"sbatch refused the job: {message}")
        raise SlurmError(f"{command} failed (exit status {proc.returncode}): {message}")
    return proc.stdout


def _job_id(job_id):
    text = str(job_id).strip()
    if not re.fullmatch(r"\d+", text):
        raise ValueError(f"not a Slurm job id: {job_id!r}")
    return text


def sbatch_array(script_path, n_tasks, *, job_name, options=(), max_parallel=None,
                 env=None, cwd=None):
    """Submit script_path as a job array of tasks 0..n_tasks-1 (at most
    max_parallel running at once when given); the job id, e.g. "1234".

    Runs ``sbatch --parsable --array=0-N[%M] --job-name=NAME <options...>
    script_path`` in cwd (the job's working directory unless options say
    otherwise); options are passed through verbatim, e.g. ("--partition=x",
    "--exclusive", "--time=10")."""
    if isinstance(options, (str, bytes)):
        raise TypeError("options must be a sequence of sbatch arguments, not one string")
    if not isinstance(n_tasks, int) or n_tasks < 1:
        raise ValueError(f"n_tasks must be a positive integer, not {n_tasks!r}")
    array = f"0-{n_tasks - 1}"
    if max_parallel is not None:
        if not isinstance(max_parallel, int) or max_parallel < 1:
            raise ValueError(f"max_parallel must be a positive integer, not {max_parallel!r}")
        array += f"%{max_parallel}"
    argv = ["sbatch", "--parsable", f"--array={array}", f"--job-name={job_name}",
            *[str(o) for o in options], os.fspath(script_path)]
    out = _run(argv, env=env, cwd=cwd)
    # --parsable prints "jobid" or "jobid;cluster".
    first = _last_line(out).split(";")[0]
    if not re.fullmatch(r"\d+", first):
        raise SlurmError(f"sbatch printed no job id: {_last_line(out) or 'nothing'}")
    return first


def _squeue_states(job_id, env):
    """Task -> state for the tasks slurmctld still holds (live and recently ended)."""
    def unknown_job(rc, stderr):
        # Every task gone from slurmctld's memory: squeue calls the id invalid.
        return "Invalid job id" in stderr
    out = _run(["squeue", "--noheader", "--array", "--states=all", f"--jobs={job_id}",
                "--format=%K|%T"], env=env, ok=unknown_job)
    states = {}
    for line in out.splitlines():
        task, _, state = line.strip().partition("|")
        if task.isdigit() and state:
            states[int(task)] = state.split()[0]
    return states


_config_cache = {}


def _config(env):
    """scontrol show config as a dict (cached per SLURM_CONF and PATH)."""
    merged = _environment(env)
    key = (merged.get("SLURM_CONF"), merged.get("PATH"))
    if key not in _config_cache:
        out = _run(["scontrol", "show", "config"], env=env)
        config = {}
        for line in out.splitlines():
            name, sep, value = line.partition("=")
            if sep and name.strip() and " " not in name.strip():
                config[name.strip()] = value.strip()
        _config_cache[key] = config
    return _config_cache[key]


def _sacct_states(job_id, env):
    out = _run(["sacct", "--noheader", "--parsable2", "--allocations", f"--jobs={job_id}",
                "--format=JobID,State"], env=env)
    states = {}
    for line in out.splitlines():
        jid, _, state = line.strip().partition("|")
        prefix = f"{job_id}_"
        if jid.startswith(prefix) and state:
            for task in _task_ids(jid[len(prefix):]):
                # "CANCELLED by 0" -> "CANCELLED"
                states[task] = state.split()[0]
    return states


def _task_ids(spec):
    """Array task ids from "7" or a range list such as "[0-3]", "[1,4-6%2]"."""
    if spec.isdigit():
        return [int(spec)]
    m = re.fullmatch(r"\[([0-9,\-]+)(?:%\d+)?\]", spec)
    if not m:
        return []
    tasks = []
    for part in m.group(1).split(","):
        first, _, last = part.partition("-")
        if first.isdigit() and (not last or last.isdigit()):
            tasks.extend(range(int(first), int(last or first) + 1))
    return tasks


_JOBCOMP_FIELD = re.compile(r"(\w+)=(\S*)")


def _jobcomp_states(job_id, path):
    """(task -> state, state of the never-started remainder or None)."""
    try:
        f = open(path, encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return {}, None  # no job has finished yet
    except OSError as e:
        raise SlurmError(f"cannot read the job completion file {path}: {e.strerror or e}") from None
    states, rest = {}, None
    needles = (f"ArrayJobId={job_id} ", f"JobId={job_id} ")
    with f:
        for line in f:
            if not any(n in line for n in needles):
                continue
            fields = dict(_JOBCOMP_FIELD.findall(line))
            state = fields.get("JobState")
            if not state:
                continue
            if "ArrayJobId" in fields:
                task = fields.get("ArrayTaskId", "")
                if fields["ArrayJobId"] == job_id and task.isdigit():
                    states[int(task)] = state  # a later line (requeue) wins
            elif fields.get("JobId") == job_id:
                rest = state  # the array's tasks that were never split off
    return states, rest


def completion_records(job_id, env=None, n_tasks=None):
    """Task -> state from the cluster's durable record of finished jobs only:
    sacct where accounting storage is configured, else the jobcomp/filetxt
    file; {} where the cluster keeps neither. With n_tasks, tasks 0..n_tasks-1
    that the jobcomp file only covers as the array's never-started remainder
    get its state (see the module's docstring)."""
    job_id = _job_id(job_id)
    config = _config(env)
    if config.get("AccountingStorageType", "accounting_storage/none") != "accounting_storage/none":
        return _sacct_states(job_id, env)
    if config.get("JobCompType") == "jobcomp/filetxt" and config.get("JobCompLoc"):
        states, rest = _jobcomp_states(job_id, config["JobCompLoc"])
        if rest is not None and n_tasks is not None:
            for task in range(n_tasks):
                states.setdefault(task, rest)
        return states
    return {}


def _states(job_id, env, n_tasks=None, squeue_enough=False):
    live = _squeue_states(job_id, env)
    if squeue_enough and n_tasks is not None and all(t in live for t in range(n_tasks)):
        return live
    states = completion_records(job_id, env, n_tasks)
    states.update(live)
    return states


def array_states(job_id, env=None, n_tasks=None):
    """Task -> state (PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT,
    NODE_FAIL, ...) of each task of array job job_id: squeue for the tasks
    slurmctld holds, the completion record (sacct or the jobcomp/filetxt
    file) for the finished ones it has forgotten. Tasks never seen are absent.
    n_tasks (optional): the array's size, for the jobcomp file's record of
    tasks cancelled before they started (see the module's docstring)."""
    return _states(_job_id(job_id), env, n_tasks)


def cancel(job_id, task=None, env=None):
    """scancel the whole array job, or only its task `task`."""
    target = _job_id(job_id)
    if task is not None:
        if not isinstance(task, int) or task < 0:
            raise ValueError(f"task must be a non-negative integer, not {task!r}")
        target += f"_{task}"

    def already_over(rc, stderr):
        # Cancelling what has already ended is no error for us.
        return "already completing or completed" in stderr
    _run(["scancel", target], env=env, ok=already_over)


def _category(state):
    if state in DONE_STATES:
        return "done"
    if state in FAILED_STATES:
        return "failed"
    if state in RUNNING_STATES:
        return "running"
    return "pending"


def wait(job_id, n_tasks, *, poll_s=1.0, on_progress=None, timeout_s=None, env=None):
    """Poll until every task 0..n_tasks-1 of array job job_id is in a final
    state; their states.

    on_progress(counts) is called with {"pending": p, "running": r, "done": d,
    "failed": f} (summing to n_tasks; tasks not seen yet count as pending) at
    the first poll and whenever the counts change. "done" is COMPLETED,
    "failed" every other final state. Raises SlurmError after timeout_s
    seconds, or when tasks vanish from squeue with no completion record to
    say how they ended. A task that Slurm dropped while it was pending
    (scancel of one pending task leaves no record) is CANCELLED."""
    job_id = _job_id(job_id)
    if not isinstance(n_tasks, int) or n_tasks < 1:
        raise ValueError(f"n_tasks must be a positive integer, not {n_tasks!r}")
    need = range(n_tasks)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    seen = set()        # tasks that some poll has reported
    last_state = {}     # task -> the state the last poll that reported it gave
    lost_polls = 0      # consecutive polls in which a seen task was reported by no source
    unknown_polls = 0   # consecutive polls that found no task at all, none seen before
    gone_polls = 0      # consecutive polls in which the job had nothing pending or running left
    dropped = set()     # tasks found dropped while pending: CANCELLED from then on
    last_counts = None
    while True:
        states = _states(job_id, env, n_tasks, squeue_enough=True)
        # A task cancelled while pending (scancel JOB_TASK) is dropped by Slurm
        # with no record at all (22.05: not in squeue, not in the jobcomp
        # file). So a task that was last seen pending and is gone, or was never
        # seen while the job has nothing pending or running left, never ran:
        # it is CANCELLED (after two polls that agree).
        active = any(_category(st) in ("pending", "running") for st in states.values())
        absent = [t for t in need if t not in states]
        gone_polls = gone_polls + 1 if (absent and seen and not active) else 0
        for task in absent:
            if task in dropped or last_state.get(task) == "PENDING" or (task not in seen and gone_polls >= 2):
                states[task] = "CANCELLED"
                dropped.add(task)
        last_state.update(states)
        counts = {"pending": 0, "running": 0, "done": 0, "failed": 0}
        for task in need:
            counts[_category(states.get(task))] += 1
        if counts != last_counts:
            last_counts = counts
            if on_progress is not None:
                on_progress(dict(counts))
        if counts["done"] + counts["failed"] == n_tasks:
            return {task: states[task] for task in need}

        now_seen = {t for t in need if t in states}
        lost = sorted(seen - now_seen)
        seen |= now_seen
        lost_polls = lost_polls + 1 if lost else 0
        if lost_polls >= 2:
            raise SlurmError(
                f"job {job_id}: task(s) {', '.join(map(str, lost))} left squeue with no "
                "completion record (this cluster keeps no accounting or jobcomp/filetxt "
                "file; poll more often than MinJobAge)")
        unknown_polls = unknown_polls + 1 if not seen else 0
        if unknown_polls >= 3:
            raise SlurmError(f"job {job_id}: unknown to squeue and to the completion record")

        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                unfinished = n_tasks - counts["done"] - counts["failed"]
                raise SlurmError(f"job {job_id}: {unfinished} of {n_tasks} task(s) not "
                                 f"finished after {timeout_s:g} s")
            time.sleep(min(poll_s, left))
        else:
            time.sleep(poll_s)
