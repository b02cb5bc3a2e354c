"""The one error convention of the Python side: a problem the user must see
raises ThreadburnError, whose str() is the single line to print (naming the
file, flag or setting at fault). The command line prints
"threadburn <command>: error: <line>" and exits 2; nothing half-done is left
behind (results files only ever hold whole runs)."""


class ThreadburnError(Exception):
    pass
