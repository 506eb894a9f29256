"""Shared test set-up: deterministic hypothesis profile, per-test seeding, small corpus fixtures."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, settings

# Property tests: few examples, no deadline (CI machines are slow), no example database written
# into the work tree, and derandomised so that every run draws the same examples.
settings.register_profile(
    "kvattn",
    max_examples=20,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("kvattn")

# pytest-xdist runs one process per core; intra-op threads on top of that oversubscribe the CPU
# (tiny LayerNorms then take milliseconds instead of microseconds). One thread per worker.
torch.set_num_threads(1)

#: Page load times (ms) that tests/test_browser.py measured, for the run's summary.
LOAD_TIMES_KEY = pytest.StashKey[dict]()


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """The browser test's slowest page: a measurement reported with the run, never a margin."""
    times = config.stash.get(LOAD_TIMES_KEY, None)
    if times:
        slowest = max(times, key=times.get)
        median = sorted(times.values())[len(times) // 2]
        terminalreporter.write_line(
            f"page load times: slowest {slowest} {times[slowest]:.0f} ms, "
            f"median {median:.0f} ms over {len(times)} pages (all in load_times.json)"
        )


@pytest.fixture(autouse=True)
def _seed_everything():
    """Every test starts from the same RNG state, whatever ran before it on its worker."""
    random.seed(0)
    np.random.seed(0)  # noqa: NPY002 - the legacy global RNG is what seed_everything seeds
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def pydoc_text() -> str:
    """The built-in pydoc corpus (read once per worker)."""
    from kvattn.data import load_text

    return load_text("pydoc")


@pytest.fixture(scope="session")
def small_text(pydoc_text) -> str:
    """The first 60 000 characters of the pydoc corpus: enough for a 512-piece tokenizer."""
    return pydoc_text[:60_000]


@pytest.fixture(scope="session")
def tokenizer(small_text):
    """A 512-piece tokenizer trained on :func:`small_text` (trained once per worker)."""
    from kvattn.data import train_tokenizer

    return train_tokenizer(small_text, vocab_size=512)
