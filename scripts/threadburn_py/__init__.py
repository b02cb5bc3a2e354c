"""Shared code of threadburn's sweep, compare and plot scripts.

Everything here uses the Python standard library only, so sweep.py and
compare.py run under any Python >= 3.11; only plot.py needs matplotlib.
"""
