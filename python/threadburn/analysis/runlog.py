"""A campaign's runs in memory (RunLog): the run engine hands it each run's
rows as the results file holds them (engine/campaign.py, its log), and it
makes each run's records once, as the run arrives. A tune's race, its
fresh runs, its verdict and its report read it; the file is the resume
log, read only by --resume (lib/records.py, ResultsFile.repair_for_resume).
"""
from . import runfigures
from ..lib import records


class RunLog:
    """The rows so far (as the results file holds them) and their run
    records. The engine appends one run's rows at a time; a run's records
    are made from its own rows alone (records.run_records groups rows by
    run, so the records of the rows so far are those of each run, in
    order), once."""

    def __init__(self, libomp, rows=()):
        self.libomp = libomp
        self.rows = []
        self._records = []
        self.append(rows)

    def append(self, rows):
        """Rows of whole runs (one run as the engine appends it, or a
        resumed file's); returns their records."""
        rows = list(rows)
        recs = records.run_records(rows, self.libomp, runfigures.of_run)
        self.rows += rows
        self._records += recs
        return recs

    def records(self):
        """The run records so far (a new list: a caller may sort it)."""
        return list(self._records)
