"""``python -m kvattn.train``: no command, an error that names the pre-training command."""

import sys

# kvattn.train was the pre-training command until pre-training moved to kvattn.pretrain; an
# old `python -m kvattn.train --config FILE` must not exit 0 having trained nothing. (It
# cannot hand over: train sits below pretrain and never imports it.)
print(
    "python -m kvattn.train: error: kvattn.train is a library module, not a command; "
    "pre-training moved to: python -m kvattn.pretrain --config FILE (or kvattn-train "
    "--config FILE)",
    file=sys.stderr,
)
raise SystemExit(2)
