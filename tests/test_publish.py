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
MAKEFILE = ROOT / "Makefile"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def runs(job: dict) -> list[str]:
    return [step["run"] for step in job["steps"] if "run" in step]


def uses(job: dict, action: str) -> list[dict]:
    return [s for s in job["steps"] if s.get("uses", "").partition("@")[0] == action]


def pins() -> dict[str, str]:
    """requirements.txt's ``name==version`` lines, comments left out."""
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    return dict(line.split("#")[0].strip().split("==") for line in lines if "==" in line)


def make_rules() -> dict[str, tuple[list[str], list[str]]]:
    """The Makefile's plain rules: target → (prerequisites, recipe lines)."""
    rules: dict[str, tuple[list[str], list[str]]] = {}
    current = None
    for line in MAKEFILE.read_text().splitlines():
        if line.startswith("\t") and current:
            rules[current][1].append(line.strip())
        elif match := re.match(r"([\w.-]+):(?!=)(.*)", line):
            current = match[1]
            rules[current] = (match[2].split(), [])
        else:
            current = None
    return rules


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


def test_every_action_is_pinned_to_a_commit_with_its_release_in_a_comment():
    """A tag can be moved to other code; a commit cannot. Each action has one pin."""
    text = WORKFLOW.read_text()
    lines = [line for line in text.splitlines() if re.match(r"\s*(- )?uses:", line)]
    steps = [s for job in workflow()["jobs"].values() for s in job["steps"] if "uses" in s]
    assert len(lines) == len(steps) == 7
    pinned = {}
    for line in lines:
        match = re.fullmatch(
            r"\s*(?:- )?uses: ([\w-]+/[\w-]+)@([0-9a-f]{40}) # (v\d+(?:\.\d+)*)", line
        )
        assert match, line
        action, sha, tag = match.groups()
        assert pinned.setdefault(action, (sha, tag)) == (sha, tag), action
    assert set(pinned) == {
        "actions/checkout",
        "actions/setup-python",
        "actions/upload-artifact",
        "actions/upload-pages-artifact",
        "actions/deploy-pages",
    }


def test_checkouts_leave_no_token_in_the_workspace():
    """The token that actions/checkout writes into .git/config would be readable by every later
    step and by anything uploaded from the workspace (the Pages artifact, the screenshots)."""
    jobs = workflow()["jobs"]
    checkouts = [step for job in jobs.values() for step in uses(job, "actions/checkout")]
    assert len(checkouts) == 2
    assert all(step["with"]["persist-credentials"] is False for step in checkouts)


def test_each_job_gets_only_the_permissions_it_needs():
    flow = workflow()
    assert flow["permissions"] == {}
    jobs = flow["jobs"]
    for name, job in jobs.items():
        if uses(job, "actions/deploy-pages"):
            assert job["permissions"] == {"pages": "write", "id-token": "write"}, name
        else:
            assert job["permissions"] == {"contents": "read"}, name


def test_the_runner_installs_the_cpu_build_of_torch_into_the_makefile_venv():
    """PyPI's torch for Linux pulls several GB of CUDA libraries; the jobs that make the venv
    first put the CPU build of requirements.txt's torch into it, from PyTorch's CPU index only."""
    venv = re.search(r"^VENV\s*:=\s*(\S+)$", MAKEFILE.read_text(), re.MULTILINE)[1]
    torch = pins()["torch"]
    for command in ("make test", "make book"):
        [job] = [job for job in workflow()["jobs"].values() if command in runs(job)]
        steps = [" ".join(run.replace("\\\n", " ").split()) for run in runs(job)]
        [cpu] = [run for run in steps[: steps.index(command)] if TORCH_CPU_INDEX in run]
        assert f"python3 -m venv {venv} " in cpu
        assert cpu.endswith(
            f"{venv}/bin/python -m pip install --quiet --disable-pip-version-check "
            f"--index-url {TORCH_CPU_INDEX} torch=={torch}"
        )


def test_make_test_checks_the_workflow_with_zizmor_offline():
    rules = make_rules()
    reached, todo = set(), ["test"]
    while todo:
        target = todo.pop()
        if target in rules and target not in reached:
            reached.add(target)
            todo += rules[target][0]
    [zizmor] = [line for t in reached for line in rules[t][1] if "zizmor" in line]
    # offline: no GitHub token and no network, on CI and on a reader's machine alike
    assert zizmor.split() == ["$(VENV)/bin/zizmor", "--offline", ".github/workflows/"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", pins()["zizmor"])


def test_the_fast_tier_leaves_out_slow_and_integration_tests_and_make_test_runs_them():
    """`make test-fast` skips the tiers pyproject.toml declares; `make test` (CI) still runs the
    library tests of every tier (the unit target selects only by built/browser) and reports the
    slowest."""
    import tomllib

    markers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    declared = {m.split(":")[0] for m in markers["markers"]}
    assert {"slow", "integration", "built", "browser"} <= declared
    rules = make_rules()
    fast = " ".join(rules["test-fast"][1])
    assert '-m "not built and not browser and not slow and not integration"' in fast
    unit = " ".join(rules["unit"][1])
    assert '-m "not built and not browser"' in unit and "--durations=" in unit
    assert "unit" in rules["test"][0] and "test-fast" not in rules["test"][0]
