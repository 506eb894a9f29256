"""The package's import rule (CONTRIBUTING.md, "Map of lib/kvattn/"), checked with ast.

A module imports only from strictly lower layers of :data:`LAYERS`; no kvattn import hides inside
a function or class (a hidden import is how a cycle survives); the import graph has no cycle; no
module is over :data:`MAX_LINES` lines; the hand-written Student-t tail is gone (scipy's is used).
Nothing is imported or run: the files are parsed.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "lib" / "kvattn"

# Layer of each top-level module or package, bottom → top (CONTRIBUTING's map says what each holds).
LAYERS = {
    "_checks": 0,
    "_files": 0,
    "schema": 0,  # the JSON Schemas of the files the course reads (kvattn/schemas/)
    "env": 0,
    "activations": 0,
    "book": 0,
    "stats": 1,
    "readings": 1,  # how the reports read per-layer readings (missing values, NaN)
    "data": 1,
    "losses": 2,
    "config": 1,
    "sampling": 2,
    "pretrained": 2,  # the models' base class: save_pretrained, from_pretrained
    "mlp": 1,
    "lm": 3,
    "pldr": 3,
    "checkpoint": 4,
    "ablations": 4,
    "diagnostics": 5,
    "symmetry": 5,
    "interaction": 5,
    "memories": 5,
    "train": 6,
    "distributed": 6,
    "pretrain": 7,
    "experiments": 8,
    "contrast_report": 9,
    "collapse_report": 9,
    "depth_report": 10,  # reads the depth experiment with collapse_report's windows
    "generate": 8,
    "benchmark": 8,
    "reproduce": 9,
    "plots": 10,
    "explorers": 11,
    "figures": 12,  # re-exports of plots and explorers, kept for one release
    "widgets": 12,  # re-exports of explorers, kept for one release
    "exercises": 12,
}

# Inside a package, the same rule between its submodules; its __init__ sits above them all.
SUBLAYERS = {
    "diagnostics": {
        **dict.fromkeys(("measures", "criteria"), 0),  # the criteria read numbers, any source's
        "heads": 1,
        "rowmap": 2,
        "collapse": 3,
        "probes": 4,  # a trajectory of collapse's measures
    },
    "train": {
        **dict.fromkeys(("optim", "tasks"), 0),
        "loop": 1,  # steps with optim's AdamW and schedule
        "seeds": 2,  # the loop on the tasks' LM loss, once per seed
        "__main__": 3,
    },
    "symmetry": {
        **dict.fromkeys(("gaussian", "transforms"), 0),
        "violation": 1,  # Gaussian expectations of σ's violations
        "trained": 1,  # needs transforms' query/key check
        "profile": 2,  # the explorer's numbers: violation's maps and metrics
    },
    "experiments": {
        **dict.fromkeys(("records", "recipe"), 0),
        **dict.fromkeys(("contrast", "dose"), 1),  # each design: the recipe, written as a record
    },
    "plots": {"checks": 0, "style": 1, "legibility": 1, "charts": 2, "reports": 2},
    "explorers": {
        "_live": 0,  # what the live faces share
        **dict.fromkeys(("attention", "cost", "deductive", "generation", "interaction"), 1),
        **dict.fromkeys(("paired", "slot", "symmetry", "twirl"), 1),
    },
    "reproduce": {
        "files": 0,  # plans, checks, whole-file writes
        **dict.fromkeys(("checkpoints", "contrast", "hunt", "corpora"), 1),
        "cli": 2,
        "records": 2,  # the experiment-records appendix: plans and shipped results as tables
        "__main__": 3,
    },
    "exercises": {
        "_checker": 0,
        **{f"ch{n:02d}": 1 for n in range(1, 12) if n != 10},
        "ch10": 2,  # reuses ch06's RoPE matrix
    },
    "benchmark": {
        "timing": 0,
        "counting": 1,
        "reporting": 1,
        "runs": 2,
        "cli": 3,
        "__main__": 4,
    },
    "data": {
        **dict.fromkeys(("locators", "tokenizer", "tasks"), 0),
        "corpora": 1,  # the snapshots are found by the locators
        "batches": 2,  # a corpus tokenized and cut into blocks
    },
    "checkpoint": {"published": 0, "saving": 1, "loading": 2},
    "pretrain": {"config": 0, "resume": 1, "run": 2, "cli": 3, "__main__": 4},
}

MAX_LINES = 800
# Modules still over MAX_LINES, each with the reason; any other module over it fails the test.
TOO_LONG: dict[str, str] = {}


def _modules() -> dict[str, Path]:
    """Dotted name → file, for every module of the package (a package is its __init__)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if "_shipped" in parts:
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> list[tuple[str, ast.AST, list[ast.AST]]]:
    """(imported kvattn module, import node, enclosing nodes) for each kvattn import in a module."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
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
        return [f"{full}.{a.name}" if f"{full}.{a.name}" in MODULES else full for a in node.names]

    def walk(node: ast.AST, enclosing: list[ast.AST]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.extend((t, child, enclosing) for t in targets(child))
            scope = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            walk(child, [*enclosing, child] if scope else enclosing)

    walk(tree, [])
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _layer(module: str) -> tuple[str, float]:
    """(top-level name, layer) of a dotted kvattn module; the root package is above everything."""
    parts = module.split(".")
    if len(parts) == 1:
        return "kvattn", float("inf")
    return parts[1], LAYERS[parts[1]]


def test_every_module_has_a_layer():
    unplaced = sorted({m.split(".")[1] for m in MODULES if "." in m} - set(LAYERS))
    assert not unplaced, f"modules missing from LAYERS: {unplaced}"
    for package, table in SUBLAYERS.items():
        subs = {m.split(".")[2] for m in MODULES if m.startswith(f"kvattn.{package}.")}
        assert subs == set(table), f"kvattn.{package}: submodules {sorted(subs)} ≠ table"


def test_no_kvattn_import_inside_a_function_or_class():
    hidden = [
        f"{MODULES[name].relative_to(PACKAGE.parent)}:{node.lineno} imports {target} "
        f"inside {enclosing[-1].name}"
        for name, imports in GRAPH.items()
        for target, node, enclosing in imports
        if enclosing
    ]
    hidden = sorted(set(hidden))
    assert not hidden, "\n".join(hidden)


def test_no_import_cycle():
    edges = {name: {t for t, _, _ in imports if t != name} for name, imports in GRAPH.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(" → ".join([*path[path.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for name in sorted(edges):
        if name not in state:
            visit(name, [name])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_imports_only_from_lower_layers():
    wrong = []
    for name, imports in GRAPH.items():
        if name == "kvattn":
            continue  # the package's front door re-exports from any layer
        top, layer = _layer(name)
        for target, node, _ in imports:
            where = f"{MODULES[name].relative_to(PACKAGE.parent)}:{node.lineno}"
            ttop, tlayer = _layer(target)
            if ttop == top and top in SUBLAYERS:
                inner = SUBLAYERS[top]
                mine, theirs = name.split(".")[2:3], target.split(".")[2:3]
                if not mine:
                    continue  # the package's __init__ gathers its submodules
                if not theirs or inner[theirs[0]] >= inner[mine[0]]:
                    wrong.append(f"{where}: {name} imports {target} (not a lower submodule)")
            elif tlayer >= layer:
                wrong.append(f"{where}: {name} (layer {layer}) imports {target} (layer {tlayer})")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_over_the_line_limit(name):
    lines = len(MODULES[name].read_text().splitlines())
    top = name.split(".")[1] if "." in name else name
    if top in TOO_LONG and name.count(".") == 1:
        assert lines > MAX_LINES, f"{name} is {lines} lines now: drop it from TOO_LONG"
    else:
        assert lines <= MAX_LINES, f"{name} is {lines} lines (at most {MAX_LINES})"


def test_the_hand_written_t_test_is_gone():
    users = [n for n, p in MODULES.items() if "_student_t_two_sided_p" in p.read_text()]
    assert not users, f"the Simpson-rule Student-t tail is still in {users}: use scipy.stats.t"
