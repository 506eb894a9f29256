"""The book build fails loudly: a notebook that raises must fail `make book`/`make test`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

# Jupyter Book builds of fixture books: the integration tier (`make test-fast` leaves it out)
pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
JUPYTER_BOOK = Path(sys.executable).with_name("jupyter-book")


def build_flags() -> list[str]:
    """The flags the Makefile passes to `jupyter-book build` (one source of truth)."""
    out = subprocess.run(
        ["make", "--no-print-directory", "-s", "-C", str(ROOT), "jb-flags"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()


@pytest.mark.parametrize("threads", ["1", "3"])
def test_every_notebook_kernel_runs_with_bounded_idle_sleeping_threads(threads):
    """Each command of make that starts notebook kernels (full and fast book builds, nbval)
    bounds the OpenMP threads and makes idle ones sleep (OMP_WAIT_POLICY=PASSIVE): spinning or
    oversubscribed threads made a build time out on a busy machine. `make -n` prints the
    commands without running them."""
    out = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-n",
            "-C",
            str(ROOT),
            f"KERNEL_THREADS={threads}",
            "book",
            "book-fast",
            "nbval",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    kernels = [line for line in out if "jupyter-book build" in line or "--nbval" in line]
    assert len(kernels) == 3, out
    for line in kernels:
        assert "OMP_WAIT_POLICY=PASSIVE" in line.split(), line
        expected = "OMP_NUM_THREADS=1" if "--nbval" in line else f"OMP_NUM_THREADS={threads}"
        assert expected in line.split(), line


def test_build_flags_make_warnings_errors():
    flags = build_flags()
    assert {"--all", "-W", "--keep-going"} <= set(flags)


@pytest.mark.skipif(not JUPYTER_BOOK.exists(), reason="jupyter-book is not installed")
def test_a_failing_notebook_fails_the_build(tmp_path):
    """A fixture book with one raising notebook, built with our flags, exits non-zero and
    reports the failing cell."""
    book = tmp_path / "book"
    shutil.copytree(ROOT / "tests" / "fixtures" / "failing_book", book)
    result = subprocess.run(
        [str(JUPYTER_BOOK), "build", *build_flags(), str(book)],
        capture_output=True,
        text=True,
        timeout=900,  # a hang limit, not a speed check
    )
    log = result.stdout + result.stderr
    assert result.returncode != 0, log[-2000:]
    assert "Executing notebook failed" in log and "fails.err.log" in log


def _build_stalling_book(tmp_path: Path, mode: str) -> tuple[int, str]:
    """Builds the fixture whose only cell sleeps like a stalled kernel: on its first run only
    (mode "once") or on every run ("always"), with the watchdog's window shortened to 6 s."""
    book = tmp_path / "book"
    shutil.copytree(ROOT / "tests" / "fixtures" / "stalling_book", book)
    (book / "mode").write_text(mode)
    config = {
        "title": "stalling fixture",
        "only_build_toc_files": True,
        "execute": {"execute_notebooks": "force", "timeout": 600},
        "sphinx": {"local_extensions": {"notebook_execution": str(ROOT / "book" / "_ext")}},
    }
    (book / "_config.yml").write_text(yaml.safe_dump(config))
    result = subprocess.run(
        [str(JUPYTER_BOOK), "build", *build_flags(), str(book)],
        capture_output=True,
        text=True,
        timeout=900,  # a hang limit, not a speed check
        env={**os.environ, "KVATTN_STALL_S": "6"},
    )
    return result.returncode, result.stdout + result.stderr


@pytest.mark.skipif(not JUPYTER_BOOK.exists(), reason="jupyter-book is not installed")
def test_a_stalled_kernel_is_replaced_once_and_the_notebook_runs_again(tmp_path):
    """The cell sleeps (no CPU, no reply) on its first run: the watchdog kills the kernel after
    its window, the notebook runs again on a new kernel, and the build passes with the cell's
    output on the page. Without the watchdog this build would wait for the 600 s cell timeout."""
    code, log = _build_stalling_book(tmp_path, "once")
    assert code == 0, log[-3000:]
    assert "stalls.ipynb: the kernel stopped answering for 6 s" in log
    page = (tmp_path / "book" / "_build" / "html" / "stalls.html").read_text()
    output = r'class="output stream[^>]*><div class="highlight"><pre><span></span>ran\b'
    assert re.search(output, page), "the cell's output is not on the page"


@pytest.mark.skipif(not JUPYTER_BOOK.exists(), reason="jupyter-book is not installed")
def test_a_kernel_that_stalls_twice_fails_the_build_naming_the_notebook(tmp_path):
    code, log = _build_stalling_book(tmp_path, "always")
    assert code != 0, log[-3000:]
    assert "stalls.ipynb: the kernel stopped answering twice" in log


def test_the_course_build_runs_the_notebook_execution_extension():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["sphinx"]["local_extensions"]["notebook_execution"] == "book/_ext"


def test_course_config_raises_on_notebook_errors():
    """Belt and braces: the course's own config also fails on a raising cell without -W."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["sphinx"]["config"]["nb_execution_raise_on_error"] is True
    assert config["execute"]["execute_notebooks"] == "force"
    assert config["execute"]["allow_errors"] is False
    assert config["only_build_toc_files"] is True
    for excluded in (".venv", "_build", "lib", "data", "tests"):
        assert excluded in config["exclude_patterns"]


def test_static_javascript_is_served_from_book_static_not_root_static():
    """Vendored scripts live in book/_static/vendor, and no root _static/ exists (Jupyter Book 1
    would load every script in it on every page)."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]["config"]
    assert config["html_static_path"] == ["book/_static"]
    assert config["mathjax_path"] == "vendor/mathjax-tex-svg.js"
    assert list(config["nb_ipywidgets_js"]) == ["vendor/require.js", "vendor/embed-amd.js"]
    assert config["html_js_files"] == ["vendor/plotly.min.js", "course.js"]
    assert not (ROOT / "_static").exists()


def test_requirements_pin_an_ipykernel_without_the_unread_request_window():
    """ipykernel 7 can leave an execute_request unread under load (ipython/ipykernel#1554): a
    fast build stalled on it; the pin keeps 6.x until a fixed 7.x is verified here."""
    pins = dict(
        line.split("#")[0].strip().split("==")
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if "==" in line.split("#")[0]
    )
    assert pins["ipykernel"].startswith("6."), pins["ipykernel"]


def test_requirements_pin_torch_and_jupyter_book_1():
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    assert "torch==2.13.0" in lines
    jb = [line for line in lines if line.startswith("jupyter-book")]
    assert jb and jb[0].split("==")[-1].startswith("1.")


def test_the_build_never_sends_output_widget_state_back_on_the_shell_socket(monkeypatch):
    """nbclient's stand-in for the Output widget sent each new state to the kernel on the shell
    socket while the reply task awaited it, which could swallow the reply's wake-up (a fast build
    stalled on a live explorer's cell). The extension drops that message; the state is kept."""
    import types

    from myst_nb.core.execute.direct import NotebookClientDirect
    from nbclient.output_widget import OutputWidget

    monkeypatch.syspath_prepend(str(ROOT / "book" / "_ext"))
    monkeypatch.setattr(OutputWidget, "_publish_msg", OutputWidget._publish_msg)
    monkeypatch.setattr(NotebookClientDirect, "start_client", NotebookClientDirect.start_client)
    import notebook_execution

    notebook_execution.setup(types.SimpleNamespace())
    sent = []
    channel = types.SimpleNamespace(send=sent.append)
    session = types.SimpleNamespace(msg=lambda msg_type, **_: {"msg_type": msg_type})
    client = types.SimpleNamespace(shell_channel=channel, session=session)
    executor = types.SimpleNamespace(widget_state={"w": {}})
    widget = OutputWidget("w", {"outputs": []}, client, executor)
    widget.outputs = [{"output_type": "stream", "name": "stdout", "text": "x"}]
    widget.sync_state()
    assert sent == []  # nothing went to the kernel
    assert getattr(NotebookClientDirect.start_client, "_kvattn_watched", False)
