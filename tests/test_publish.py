"""Publishing the book: the GitHub Actions workflow tests every push and pull request and
deploys the `make book` output to GitHub Pages from the default branch, and the Pages address
derives from the one repository URL in _config.yml."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from test_notebooks import _build_info

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "book.yml"


def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def runs(job: dict) -> list[str]:
    return [step["run"] for step in job["steps"] if "run" in step]


def uses(job: dict, action: str) -> list[dict]:
    return [s for s in job["steps"] if s.get("uses", "").partition("@")[0] == action]


def test_workflow_runs_make_test_on_every_push_and_pull_request():
    flow = workflow()
    triggers = flow.get("on", flow.get(True))  # YAML 1.1 reads the key `on` as True
    assert set(triggers) >= {"push", "pull_request"}
    assert triggers["push"] is None and triggers["pull_request"] is None  # every branch
    testing = [job for job in flow["jobs"].values() if "make test" in runs(job)]
    assert len(testing) == 1 and "if" not in testing[0]
    assert uses(testing[0], "actions/checkout")


def test_workflow_deploys_the_make_book_output_from_the_default_branch():
    jobs = workflow()["jobs"]
    [(name, book)] = [(n, job) for n, job in jobs.items() if "make book" in runs(job)]
    testing = next(n for n, job in jobs.items() if "make test" in runs(job))
    assert book["needs"] == testing  # nothing is published that failed the tests
    assert "github.event_name == 'push'" in book["if"]
    assert "github.event.repository.default_branch" in book["if"]
    [upload] = uses(book, "actions/upload-pages-artifact")
    # `make book` builds into _build/html (the path it prints)
    assert upload["with"]["path"] == "_build/html"
    assert "file://$(CURDIR)/_build/html/index.html" in (ROOT / "Makefile").read_text()
    [deploy] = [job for job in jobs.values() if uses(job, "actions/deploy-pages")]
    assert deploy["needs"] == name
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["environment"]["name"] == "github-pages"
    assert deploy["concurrency"]["cancel-in-progress"] is False


@pytest.mark.parametrize(
    "path", [WORKFLOW, ROOT / "book" / "_ext" / "build_info.py", ROOT / "README.md"]
)
def test_the_repository_url_is_written_once(path):
    """Only _config.yml names the repository; the workflow, the book and the README derive from
    it or say where it is."""
    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    assert url.removeprefix("https://github.com/") not in path.read_text()


@pytest.mark.parametrize(
    ("repository", "pages"),
    [
        (
            "https://github.com/kvattn/bilinear-transformers",
            "https://kvattn.github.io/bilinear-transformers/",
        ),
        ("https://github.com/Some-User/course.git", "https://some-user.github.io/course/"),
        ("https://github.com/me/Book/", "https://me.github.io/Book/"),
        ("https://github.com/Me/me.github.io", "https://me.github.io/"),
    ],
)
def test_pages_url_derives_from_the_repository_url(repository, pages):
    assert _build_info().pages_url(repository) == pages


@pytest.mark.parametrize(
    "bad",
    ["https://gitlab.com/me/book", "https://github.com/me", "git@github.com:me/book.git", ""],
)
def test_pages_url_refuses_other_addresses(bad):
    with pytest.raises(ValueError, match=re.escape(f"OWNER/NAME, got {bad!r}")):
        _build_info().pages_url(bad)
