import sys

from .lib.interpreter import ensure_scipy

ensure_scipy()  # before anything imports scipy: another python3 may have it (interpreter.py)

from .cli import main  # noqa: E402

sys.exit(main())
