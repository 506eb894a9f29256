"""The package's import rule (CONTRIBUTING.md, "Map of lib/kvattn/"), checked with ast.

Two bands: the core library (``kvattn`` outside ``kvattn.course``) and the course wing
(``kvattn.course``). A module imports only from strictly lower layers of its package's table in
:data:`TABLES` (the course wing sits above the whole core); no core module imports the wing; no
kvattn import hides inside a function or class (a hidden import is how a cycle survives); the
import graph has no cycle; no module is over :data:`MAX_LINES` lines; the hand-written Student-t
tail is gone (scipy's is used). The files are parsed, not imported, and each check is also run on
a small made-up package that breaks it, so that a check that cannot fail fails its test.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "lib" / "kvattn"
WING = "kvattn.course"

# The layer of each child of a package, bottom → top (CONTRIBUTING's map says what each holds).
# A package's __init__ sits above its children and may gather them; the root package's __init__
# is the front door and may re-export any core module.
TABLES: dict[str, dict[str, float]] = {
    "kvattn": {
        **dict.fromkeys(("_checks", "_files", "schema", "activations"), 0),
        **dict.fromkeys(("stats", "readings", "data", "config", "mlp"), 1),
        "losses": 2,
        "sampling": 2,
        "pretrained": 2,  # the models' base class: save_pretrained, from_pretrained
        "plga": 2,  # the model's mathematics: torch and config only
        "lm": 3,
        "generation": 3,  # decoding, a base class of the models
        "pldr": 4,  # the public models: plga + checks + generation + pretrained
        **dict.fromkeys(("checkpoint", "ablations"), 5),
        **dict.fromkeys(("diagnostics", "symmetry", "interaction", "memories"), 6),
        **dict.fromkeys(("train", "distributed"), 7),
        "pretrain": 8,
        **dict.fromkeys(("experiments", "generate", "benchmark"), 9),
        "reproduce": 10,
        "course": 11,  # the course wing, above the whole core
    },
    "kvattn.diagnostics": {
        **dict.fromkeys(("measures", "criteria"), 0),  # the criteria read numbers, any source's
        "heads": 1,
        "rowmap": 2,
        "collapse": 3,
        "probes": 4,  # a trajectory of collapse's measures
    },
    "kvattn.train": {
        **dict.fromkeys(("optim", "tasks"), 0),
        "loop": 1,  # steps with optim's AdamW and schedule
        "seeds": 2,  # the loop on the tasks' LM loss, once per seed
        "__main__": 3,
    },
    "kvattn.experiments": {
        **dict.fromkeys(("records", "recipe"), 0),
        **dict.fromkeys(("contrast", "dose"), 1),  # each design: the recipe, written as a record
    },
    "kvattn.symmetry": {
        **dict.fromkeys(("gaussian", "transforms"), 0),
        "violation": 1,  # Gaussian expectations of σ's violations
        "trained": 1,  # needs transforms' query/key check
        "profile": 2,  # the explorer's numbers: violation's maps and metrics
    },
    "kvattn.reproduce": {
        "files": 0,  # plans, checks, whole-file writes
        **dict.fromkeys(("checkpoints", "contrast", "hunt", "corpora"), 1),
        "cli": 2,
        "__main__": 3,
    },
    "kvattn.benchmark": {
        "timing": 0,
        "counting": 1,
        "reporting": 1,
        "runs": 2,
        "cli": 3,
        "__main__": 4,
    },
    "kvattn.data": {
        **dict.fromkeys(("locators", "tokenizer", "tasks"), 0),
        "corpora": 1,  # the snapshots are found by the locators
        "batches": 2,  # a corpus tokenized and cut into blocks
    },
    "kvattn.checkpoint": {"published": 0, "saving": 1, "loading": 2},
    "kvattn.pretrain": {"config": 0, "resume": 1, "run": 2, "cli": 3, "__main__": 4},
    "kvattn.course": {
        "env": 0,  # a notebook's set-up: device, seeds, fast mode, the plotly renderer
        **dict.fromkeys(("book", "plots", "contrast_report", "collapse_report"), 1),
        **dict.fromkeys(("hunt_report", "records"), 1),
        "depth_report": 2,  # reads the depth experiment with the hunt's windows
        "explorers": 2,
        "exercises": 2,
    },
    "kvattn.course.plots": {
        "checks": 0,
        "style": 1,
        "geometry": 1,  # where plotly puts text and markers
        "legibility": 2,
        **dict.fromkeys(("charts", "estimates", "reports"), 3),  # they place labels
    },
    "kvattn.course.explorers": {
        "_live": 0,  # what the live faces share
        **dict.fromkeys(("attention", "cost", "deductive", "generation", "interaction"), 1),
        **dict.fromkeys(("paired", "slot", "symmetry", "twirl"), 1),
    },
    "kvattn.course.exercises": {
        "_checker": 0,
        **{f"ch{n:02d}": 1 for n in range(1, 12) if n != 10},
        "ch10": 2,  # reuses ch06's RoPE matrix
    },
}

MAX_LINES = 650


def modules_of(package: Path) -> dict[str, Path]:
    """Dotted name → file, for every module under ``package`` (a package is its __init__)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        if "_shipped" in parts:
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, ast.AST, list]]:
    """(imported kvattn module, import node, enclosing scopes) for each kvattn import of a
    module."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []

    def targets(node: ast.AST) -> list[str]:
        if isinstance(node, ast.Import):
            return [a.name for a in node.names if a.name.split(".")[0] == "kvattn"]
        if node.level:
            base = package.split(".")
            base = base[: len(base) - (node.level - 1)]
            full = ".".join([*base, node.module] if node.module else base)
        else:
            full = node.module or ""
        if full.split(".")[0] != "kvattn":
            return []
        # `from . import data` imports the module kvattn.data, not the package.
        return [f"{full}.{a.name}" if f"{full}.{a.name}" in modules else full for a in node.names]

    def walk(node: ast.AST, enclosing: list) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.extend((t, child, enclosing) for t in targets(child))
            scope = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            walk(child, [*enclosing, child] if scope else enclosing)

    walk(tree, [])
    return found


def graph_of(modules: dict[str, Path]) -> dict[str, list]:
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def _where(modules: dict[str, Path], name: str, node: ast.AST) -> str:
    return f"{modules[name].relative_to(modules['kvattn'].parents[1])}:{node.lineno}"


def hidden_imports(graph: dict, modules: dict[str, Path]) -> list[str]:
    """kvattn imports inside a function or class."""
    return sorted(
        {
            f"{_where(modules, name, node)} imports {target} inside {enclosing[-1].name}"
            for name, imports in graph.items()
            for target, node, enclosing in imports
            if enclosing
        }
    )


def cycles(graph: dict) -> list[str]:
    """Import cycles, each as a path."""
    edges = {name: {t for t, _, _ in imports if t != name} for name, imports in graph.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    found = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                found.append(" → ".join([*path[path.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for name in sorted(edges):
        if name not in state:
            visit(name, [name])
    return found


def unplaced(modules: dict[str, Path], tables: dict[str, dict]) -> list[str]:
    """Modules whose package has a table that does not place them."""
    return sorted(
        name
        for name in modules
        if "." in name
        and name.rpartition(".")[0] in tables
        and name.rpartition(".")[2] not in tables[name.rpartition(".")[0]]
    )


def upward_imports(graph: dict, modules: dict[str, Path], tables: dict[str, dict]) -> list[str]:
    """Imports that do not go strictly down: compared in the innermost package holding both
    modules, by that package's table. A package's __init__ may import its own children."""
    wrong = []
    for name, imports in graph.items():
        for target, node, _ in imports:
            if target == name or (
                target.startswith(name + ".") and modules[name].stem == "__init__"
            ):
                continue  # a package gathering its own children
            a, b = name.split("."), target.split(".")
            i = 0
            while i < min(len(a), len(b)) and a[i] == b[i]:
                i += 1
            package = ".".join(a[:i])
            if i == len(a) or i == len(b):
                wrong.append(f"{_where(modules, name, node)}: {name} imports its package {target}")
                continue
            if package == "kvattn" and name == "kvattn":
                continue
            table = tables[package]
            mine, theirs = table[a[i]], table[b[i]]
            if theirs >= mine:
                wrong.append(
                    f"{_where(modules, name, node)}: {name} (layer {mine} of {package}) "
                    f"imports {target} (layer {theirs})"
                )
    return wrong


def wing_imports(graph: dict, modules: dict[str, Path]) -> list[str]:
    """Core modules (the root package included) that import the course wing."""
    return [
        f"{_where(modules, name, node)}: {name} imports the course wing ({target})"
        for name, imports in graph.items()
        if not (name == WING or name.startswith(WING + "."))
        for target, node, _ in imports
        if target == WING or target.startswith(WING + ".")
    ]


MODULES = modules_of(PACKAGE)
GRAPH = graph_of(MODULES)


def test_every_module_has_a_layer():
    packages = {name for name, path in MODULES.items() if path.name == "__init__.py"}
    assert packages <= set(TABLES), f"packages with no table: {sorted(packages - set(TABLES))}"
    assert not unplaced(MODULES, TABLES)
    for package in TABLES:
        children = {m.rpartition(".")[2] for m in MODULES if m.rpartition(".")[0] == package}
        assert children == set(TABLES[package]), f"{package}: {sorted(children)} ≠ its table"


def test_no_kvattn_import_inside_a_function_or_class():
    hidden = hidden_imports(GRAPH, MODULES)
    assert not hidden, "\n".join(hidden)


def test_no_import_cycle():
    found = cycles(GRAPH)
    assert not found, "import cycles:\n" + "\n".join(found)


def test_imports_only_from_lower_layers():
    wrong = upward_imports(GRAPH, MODULES, TABLES)
    assert not wrong, "\n".join(wrong)


def test_the_core_imports_nothing_from_the_course_wing():
    wrong = wing_imports(GRAPH, MODULES)
    assert not wrong, "\n".join(wrong)


def test_importing_kvattn_loads_no_plotting_or_widget_stack():
    """``import kvattn``, and every core module, in a fresh interpreter: no plotly, ipywidgets or
    matplotlib in ``sys.modules`` (a researcher's install does not pay for the course's
    figures). Every course-wing module is left out; importing one of them does load plotly."""
    core = sorted(m for m in MODULES if not (m == WING or m.startswith(WING + ".")))
    core = [m for m in core if not m.endswith("__main__")]
    code = (
        "import importlib, sys\n"
        f"for m in {core!r}: importlib.import_module(m)\n"
        "print(sorted({m.split('.')[0] for m in sys.modules}"
        " & {'plotly', 'ipywidgets', 'matplotlib', 'IPython'}))\n"
        "import kvattn.course.plots\n"
        "print('plotly' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    ).stdout.split("\n")
    assert out[0] == "[]", f"the core loads {out[0]}"
    assert out[1] == "True"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_over_the_line_limit(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{name} is {lines} lines (at most {MAX_LINES})"


def test_the_model_file_imports_only_torch_and_the_config():
    """kvattn.plga, the file a chapter shows, reads top to bottom with nothing but torch and
    kvattn.config (and the standard library) behind it."""
    tree = ast.parse(MODULES["kvattn.plga"].read_text())
    roots = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            roots.add("." + (node.module or "") if node.level else node.module.split(".")[0])
    assert roots <= {"__future__", "math", "dataclasses", "torch", ".config"}, roots


def test_the_hand_written_t_test_is_gone():
    users = [n for n, p in MODULES.items() if "_student_t_two_sided_p" in p.read_text()]
    assert not users, f"the Simpson-rule Student-t tail is still in {users}: use scipy.stats.t"


# -- each check fails on a package that breaks it -------------------------------------------------


def _made_up(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    for relative, source in {"__init__.py": "", **files}.items():
        path = tmp_path / "kvattn" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return modules_of(tmp_path / "kvattn")


MADE_UP_TABLES = {"kvattn": {"low": 0, "high": 1, "course": 2}, "kvattn.course": {"plots": 0}}


def test_each_check_fails_on_a_package_that_breaks_it(tmp_path):
    modules = _made_up(
        tmp_path,
        {
            "low.py": "from .high import x\n",  # upward, and a cycle with high
            "high.py": "from . import low\ndef f():\n    from . import low\n",  # hidden
            "course/__init__.py": "",
            "course/plots.py": "from .. import low\n",  # the wing may use the core
            "extra.py": "from .course import plots\n",  # unplaced, and core → wing
        },
    )
    graph = graph_of(modules)
    assert unplaced(modules, MADE_UP_TABLES) == ["kvattn.extra"]
    assert [h.split(" imports ")[1] for h in hidden_imports(graph, modules)] == [
        "kvattn.low inside f"
    ]
    assert cycles(graph) == ["kvattn.low → kvattn.high → kvattn.low"]
    tables = {**MADE_UP_TABLES, "kvattn": {**MADE_UP_TABLES["kvattn"], "extra": 3}}
    upward = upward_imports(graph, modules, tables)
    assert [w.split(": ", 1)[1] for w in upward] == [
        "kvattn.low (layer 0 of kvattn) imports kvattn.high (layer 1)"
    ]
    assert [w.split(": ", 1)[1] for w in wing_imports(graph, modules)] == [
        "kvattn.extra imports the course wing (kvattn.course.plots)"
    ]
