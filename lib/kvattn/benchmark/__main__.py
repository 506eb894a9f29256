"""``python -m kvattn.benchmark``: the command line of :func:`kvattn.benchmark.cli.main`."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m kvattn.benchmark"))
