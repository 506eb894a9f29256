"""``python -m kvattn.pretrain``: the same command as ``kvattn-train``."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
