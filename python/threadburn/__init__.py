"""threadburn: how much CPU OpenMP, TBB and oneDNN worker threads burn around
training steps, and what each thread setting costs.

The Python side of the suite: the one command line (``threadburn``), sweeps
over grids of settings, comparisons, plots and findings. It reads the C++
programs' own description of themselves (``--describe``) instead of repeating
their rules. Interpreter: Debian's /usr/bin/python3 (numpy and matplotlib
come from apt); everything but the plots needs only the standard library.
See docs/design.md.
"""
