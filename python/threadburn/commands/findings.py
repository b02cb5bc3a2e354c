"""threadburn findings: results/FINDINGS.md from its template and the committed
result CSVs, so every number in it can be regenerated and checked.

The template (docs/findings.template.md) holds the prose; in it
  {{table NAME}}            is replaced by the table NAME (TABLES below), and
  {{NAME|ROW|COLUMN}}       by one cell of it: ROW is the row's key (its label
                            cells joined by " / "), COLUMN the header text.
So prose numbers come from the tables too. `threadburn findings --check`
(a unit test) fails when results/FINDINGS.md differs from what the template
and the CSVs give; `--write` rewrites it.

This command reads the template and what each table it names is made of
(TABLES: a CSV, the rule recorded beside it, Google Benchmark JSON files),
has analysis/findings.py compute each table's figures and export/findings.py
lay them out, and writes or checks the page.
"""
import argparse
import difflib
import json
import os
from dataclasses import dataclass, field

from ..analysis import findings as computed, results
from ..export import findings as layout
from ..lib import files, paths, records
from ..lib.errors import ThreadburnError


@dataclass(frozen=True)
class Source:
    """What a table is made of, as read: the rows of its CSV, the file's name
    (a verdict's source), the rule its verdict file recorded (or None) and,
    per key of its Spec's documents, the entries of that Google Benchmark
    JSON file."""
    rows: list
    name: str = ""
    rule: object = None
    documents: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Spec:
    csv: str                  # its CSV in results/, without .csv
    make: object              # Source -> layout.Table
    documents: dict = field(default_factory=dict)  # {key: JSON file in results/}


CUDA_SYNC_FILES = {"spin": "cuda-h200-spin.json", "blocking_sync": "cuda-h200-blocking_sync.json"}


def verdict_spec(csv, title, baseline=None):
    return Spec(csv, lambda s: layout.verdict_table(computed.verdict(s.rows, s.name, s.rule, paths.LIBOMP, baseline),
                                                    title))


def burn_spec(csv, title):
    return Spec(csv, lambda s: layout.burn_table(computed.burn(s.rows), title))


def tune_spec(csv, title):
    return Spec(csv, lambda s: layout.tune_table(computed.tune(s.rows), title))


# name -> what it is made of, and how
TABLES = {
    "seed000": burn_spec("seed000", "An SGD step, then 2 s idle (seed000.csv)"),
    "default": burn_spec("default", "The default study (default.csv)"),
    "blocktime": burn_spec("blocktime", "Blocktime / spin count / wait policy (blocktime.csv)"),
    "launcher": burn_spec("launcher", "PyTorch's launcher preset against the others (launcher.csv)"),
    "runtime": Spec("runtime", lambda s: layout.runtime_table(computed.runtime(s.rows))),
    "loader": Spec("loader", lambda s: layout.loader_table(computed.loader(s.rows))),
    "oversubscription": Spec("oversubscription", lambda s: layout.oversub_table(results.oversubscription(s.rows))),
    "onednn": Spec("onednn", lambda s: layout.onednn_table(computed.onednn(s.rows))),
    "batch_workers": burn_spec("batch_workers", "Batch x workers (batch_workers.csv)"),
    "sampler": Spec("sampler", lambda s: layout.sampler_table(computed.sampler(s.rows))),
    "ddp": Spec("ddp", lambda s: layout.ddp_table(results.world_scaling(s.rows))),
    "overheads": Spec("overheads", lambda s: layout.overheads_table(computed.overheads(s.rows))),
    "decisions": Spec("decisions", lambda s: layout.decisions_table(
        s.rows, "The decision rule, version 5, on synthetic tunes whose truth is known (decisions.csv, "
        "bench/decisions.py; shares of the cases, tune's default budget)")),
    "decisions_v2": Spec("decisions_v2", lambda s: layout.decisions_table(
        s.rows, "The same scenarios and seeds under rule version 2, before issue 32 (decisions_v2.csv)")),
    "decisions_v3": Spec("decisions_v3", lambda s: layout.decisions_table(
        s.rows, "The same scenarios and seeds under rule version 3 (decisions_v3.csv)")),
    "decisions_v4": Spec("decisions_v4", lambda s: layout.decisions_table(
        s.rows, "The same scenarios and seeds under rule version 4 (decisions_v4.csv)")),
    "fleet": Spec("fleet", lambda s: layout.fleet_table(computed.fleet(s.rows))),
    "fleet_ddp": Spec("fleet_ddp", lambda s: layout.fleet_ddp_table(computed.fleet_ddp(s.rows))),
    "verdict_default": verdict_spec("default", "Verdicts of the default study (default.csv)"),
    "verdict_loader_settings": verdict_spec("loader-settings", "Verdict of the loader grid with its loader and "
                                                               "workers as settings (loader-settings.csv)"),
    "verdict_tune_sleep": verdict_spec("tune-sleep_step_sleep", "Verdict of the tune on sleep_step_sleep.py"),
    "verdict_tune_mnist": verdict_spec("tune-mnist_adadelta", "Verdict of the tune on mnist_adadelta.py"),
    "verdict_host_mnist": verdict_spec("tune-host-mnist", "Verdicts of the host tune on the MNIST training "
                                                          "(tune-host-mnist.csv; time: host throughput)"),
    "host_mnist": Spec("tune-host-mnist", lambda s: layout.host_table(
        computed.host(s.rows), "Host plans for the MNIST training, the race's runs (tune-host-mnist.csv)")),
    "fit_host_mnist": Spec("tune-host-mnist", lambda s: layout.fit_table(
        computed.fit(s.rows, s.name, s.rule, paths.LIBOMP), "How many MNIST trainings fit this host (fresh runs)")),
    "cuda_step": Spec("cuda-h200", lambda s: layout.cuda_step_table(computed.cuda_step(s.rows))),
    "cuda_gap": Spec("cuda-h200", lambda s: layout.cuda_gap_table(computed.cuda_gap(s.rows), computed.CUDA_STALL_MS)),
    "cuda_feed": Spec("cuda-h200", lambda s: layout.cuda_feed_table(computed.cuda_feed(s.rows))),
    "cuda_sync": Spec("cuda-h200", lambda s: layout.gb_sync_table(computed.gb_sync(s.documents), CUDA_SYNC_FILES),
                      CUDA_SYNC_FILES),
    "verdict_cuda": verdict_spec("cuda-h200", "Verdicts of the H200 sweep against the preloaded step (cuda-h200.csv, "
                                              "--baseline preload=1)", baseline={"preload": "1"}),
    "tune_sleep": tune_spec("tune-sleep_step_sleep",
                            "tune on examples/sleep_step_sleep.py (tune-sleep_step_sleep.csv; wall ms)"),
    "tune_mnist": tune_spec("tune-mnist_adadelta",
                            "tune on examples/mnist_adadelta.py (tune-mnist_adadelta.csv; figure: its samples/s)"),
}


def add_parser(sub):
    p = sub.add_parser("findings", help="regenerate or check results/FINDINGS.md from the committed CSVs",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", default=os.path.join(paths.data_dir(), "results"),
                   help="folder of the reference CSVs and FINDINGS.md (default: results/)")
    p.add_argument("--template", default=os.path.join(paths.data_dir(), "docs", "findings.template.md"))
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 if FINDINGS.md is not what they give")
    mode.add_argument("--write", action="store_true", help="rewrite FINDINGS.md")
    p.set_defaults(run=main)
    return p


def read_documents(results_dir, names):
    """{key: the entries of a Google Benchmark JSON file} of {key: file name}."""
    out = {}
    for key, name in names.items():
        try:
            with open(os.path.join(results_dir, name)) as f:
                out[key] = json.load(f)["benchmarks"]
        except (OSError, ValueError, KeyError) as e:
            raise ThreadburnError(f"{name}: not a readable Google Benchmark JSON: {e}") from None
    return out


def read_source(results_dir, name, rows_of):
    """(its Spec, what it is made of) of table `name`, read from results_dir;
    rows_of: {path: rows} of the CSVs read so far (tables share files)."""
    if name not in TABLES:
        raise ThreadburnError(f"the template names table {name!r}; known: {', '.join(TABLES)}")
    spec = TABLES[name]
    path = os.path.join(results_dir, spec.csv + ".csv")
    if not os.path.exists(path):
        raise ThreadburnError(f"{path}: missing (table {name!r} of the template)")
    if path not in rows_of:
        rows_of[path] = records.read_rows(path)
    return spec, Source(rows_of[path], os.path.basename(path), files.recorded_rule(path),
                        read_documents(results_dir, spec.documents))


def render(template_text, results_dir):
    """FINDINGS.md's text: the template filled from the files in results_dir."""
    rows_of, tables = {}, {}
    for name in layout.table_names(template_text):
        spec, source = read_source(results_dir, name, rows_of)
        tables[name] = spec.make(source)
    return layout.render(template_text, tables)


def main(args):
    try:
        with open(args.template) as f:
            template = f.read()
    except OSError as e:
        raise ThreadburnError(f"{args.template}: cannot read: {e.strerror}") from None
    text = render(template, args.results)
    target = os.path.join(args.results, "FINDINGS.md")
    if args.write:
        with open(target, "w") as f:
            f.write(text)
        print(f"findings: wrote {target}")
        return 0
    if args.check:
        try:
            with open(target) as f:
                current = f.read()
        except OSError:
            current = ""
        if current != text:
            diff = difflib.unified_diff(current.splitlines(), text.splitlines(), target, "regenerated", lineterm="", n=1)
            print("\n".join(list(diff)[:60]))
            print(f"findings: {target} differs from what the template and the CSVs give; "
                  "run `threadburn findings --write` (and check the prose still holds)")
            return 1
        print(f"findings: {target} matches the template and the CSVs")
        return 0
    print(text)
    return 0
