"""threadburn slurm-task JOB_DIR TASK: inside a Slurm job array, run one
task of a `sweep --slurm` (exec_slurm.task_main). Not for direct use."""
from ..engine import exec_slurm


def add_parser(sub):
    p = sub.add_parser("slurm-task", help="(inside a Slurm job array) run one task of a sweep --slurm")
    p.add_argument("job_dir")
    p.add_argument("task", type=int)
    p.set_defaults(run=main)
    return p


def main(args):
    return exec_slurm.task_main(args.job_dir, args.task)
