# Two commands do all set-up on a fresh machine with Python >= 3.10 and the package registries:
#   make book   build the course (every notebook executed, full mode)
#   make test   lint, library tests, nbval on every notebook, the book build (fast mode), HTML checks,
#               every page in headless Chromium

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.requirements-installed
JB     := $(VENV)/bin/jupyter-book
# Warnings are errors (-W), references are checked (-n), and a notebook that raises fails the
# build; tests/test_build.py builds a fixture book with a failing notebook using these flags.
JB_FLAGS := --all -W -n --keep-going
# The fast build that `make test` checks lives apart from the full one that `make book` writes.
TEST_BUILD := _build/test
# Full-page screenshots of every page that `make browser` opened: CI keeps this folder.
SCREENSHOTS := _build/screenshots
# Every notebook kernel that make starts (book builds, nbval) runs with a bounded number of
# OpenMP threads that sleep when idle rather than spin: on a shared 2-core machine, spinning or
# oversubscribed threads slow the small tensor operations of the chapters down by an order of
# magnitude. Book builds run one kernel at a time and get half the cores (1 to 4); nbval runs two
# kernels at once with one thread each.
KERNEL_THREADS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); t=$$((n / 2)); \
                    [ $$t -lt 1 ] && t=1; [ $$t -gt 4 ] && t=4; echo $$t)
# Every figure a chapter shows passes the figure check (kvattn.course.plots.legibility): an illegible
# figure (a log axis with one labelled tick, overlapping labels, ...) fails its cell.
BOOK_ENV   := OMP_NUM_THREADS=$(KERNEL_THREADS) OMP_WAIT_POLICY=PASSIVE KVATTN_FIGURE_CHECK=1
NBVAL_ENV  := OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE KVATTN_FIGURE_CHECK=1
PYTEST_NB  := -p no:cacheprovider --nbval-lax --nbval-current-env --nbval-cell-timeout=900 \
              --nbval-sanitize-with tests/nbval_sanitize.cfg

.PHONY: help venv static book test test-fast lint format unit nbval book-fast html-check browser clean jb-flags

help:
	@echo "make book   - build the course into _build/html (creates .venv on first use)"
	@echo "make test   - everything CI runs: lint, unit tests, nbval, fast book build, HTML and browser checks"
	@echo "make test-fast - the library tests without the slow and integration ones (about a minute)"
	@echo "make lint   - ruff check, ruff format --check and zizmor on the CI workflow"
	@echo "make format - ruff format and fix"
	@echo "make clean  - remove _build (keeps .venv)"

# The venv is (re)built when requirements.txt or pyproject.toml is newer than the stamp.
$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "Python >= 3.10 is needed, found " + sys.version.split()[0])'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	@touch $(STAMP)

venv: $(STAMP)

static: $(STAMP)
	$(PY) tools/fetch_static.py

book: static
	$(BOOK_ENV) $(JB) build $(JB_FLAGS) .
	@echo "The course is at file://$(CURDIR)/_build/html/index.html"

# zizmor checks the CI workflow (pinned actions, token persistence, permissions, injection);
# --offline: no GitHub token and no network needed.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/zizmor --offline .github/workflows/

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# Every library test; the 15 slowest are reported (a measurement, never a margin).
unit: $(STAMP)
	$(PY) -m pytest -p no:cacheprovider -m "not built and not browser" -n 2 --durations=15 tests

# The fast tier a contributor runs while working (about a minute on 2 cores): the library tests
# without the slow and integration ones. `make test` (CI) runs everything.
test-fast: $(STAMP)
	$(PY) -m pytest -p no:cacheprovider -m "not built and not browser and not slow and not integration" -n 2 -q tests

# nbval runs copies of the notebooks whose checked cells carry the outputs recorded in
# tests/expected_outputs.json (the committed notebooks have no outputs to compare against).
nbval: $(STAMP)
	rm -rf _build/nbval
	$(PY) tools/notebooks.py --with-expected _build/nbval
	$(NBVAL_ENV) KVATTN_FAST=1 $(PY) -m pytest $(PYTEST_NB) -n 2 --dist loadfile _build/nbval

book-fast: static
	rm -rf $(TEST_BUILD)
	$(BOOK_ENV) KVATTN_FAST=1 $(JB) build $(JB_FLAGS) --path-output $(TEST_BUILD) .

html-check: $(STAMP)
	BUILT_HTML=$(TEST_BUILD)/_build/html $(PY) -m pytest -p no:cacheprovider -m built tests

# Every page of the fast build in headless Chromium (tests/test_browser.py): Debian's chromium,
# driven by Playwright, which never downloads a browser of its own (CI has no internet but the
# package mirrors). CHROMIUM=/path/to/chromium uses another build of it.
browser: $(STAMP)
	@test -n "$$CHROMIUM" || command -v chromium >/dev/null || \
	  { apt-get update -qq && apt-get install -y -qq chromium; } || \
	  { echo "make browser: no chromium, and 'apt-get install -y chromium' failed;" \
	         "install Debian's chromium package or set CHROMIUM=/path/to/chromium" >&2; exit 1; }
	rm -rf $(SCREENSHOTS)
	BUILT_HTML=$(TEST_BUILD)/_build/html SCREENSHOTS=$(SCREENSHOTS) \
	  $(PY) -m pytest -p no:cacheprovider -m browser tests/test_browser.py

test: lint unit nbval book-fast html-check browser
	@echo "make test: all checks passed"

clean:
	rm -rf _build

jb-flags:
	@echo $(JB_FLAGS)
