"""``python -m kvattn.reproduce``: the same command as ``kvattn-reproduce``."""

import sys

from .cli import main

sys.exit(main())
