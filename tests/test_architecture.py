"""The package's shape, read from the code's own imports: layers only downward (and, inside tasks/, groups only
downward), no import cycle, small modules (the benchmark scripts and their modules too), and no branch on the index
backend outside storage/ (adding a backend is one module in storage/backends/). The layers are top-level folders
that install as ctxrag.<layer>."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAYERS = {"storage": 0, "tasks": 1, "flows": 2, "ctxrag": 3}  # an import may only point to the same layer or below
FOLDERS = {
    "ctxrag": "ctxrag",
    "ctxrag.flows": "flows",
    "ctxrag.tasks": "tasks",
    "ctxrag.storage": "storage",
}  # package -> folder
# tasks/ by concern: a group may import its own modules and lower groups only (load and context: neither the other)
TASK_GROUPS = {
    "common": 0,
    "load": 1,
    "context": 1,
    "runners": 1,
    "embedding": 2,
    "retrieval": 3,
    "gc": 3,
    "stored": 3,
    "cost_plan": 4,
    "evaluation": 4,
    "options": 5,
    "stages": 6,
}
MAX_LINES = 400
BACKEND_NAMES = {"embedded", "elasticsearch"}
BENCHMARKS = REPO / "benchmarks"  # scripts and the modules they share, outside the layers


def modules() -> dict[str, Path]:
    found = {}
    for package, folder in FOLDERS.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = [package, *path.relative_to(REPO / folder).with_suffix("").parts]
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def layer_of(module: str) -> str:
    """``ctxrag.tasks.retrieval.search`` -> ``tasks``; ``ctxrag.cli`` -> ``ctxrag``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else "ctxrag"


def task_group(module: str) -> str | None:
    """``ctxrag.tasks.retrieval.search`` -> ``retrieval``; None for the ``ctxrag.tasks`` package itself."""
    parts = module.split(".")
    return parts[2] if layer_of(module) == "tasks" and len(parts) > 2 else None


def _type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports_of(path: Path, known: set[str]) -> set[str]:
    """Project modules ``path`` imports anywhere (function-level imports too; ``if TYPE_CHECKING:`` blocks not)."""
    tree = ast.parse(path.read_text())
    skipped = {id(child) for node in ast.walk(tree) if _type_checking_only(node) for child in ast.walk(node)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports_of(path, set(found)) - {name} for name, path in found.items()}


def test_imports_only_point_down_the_layers() -> None:
    upward = [
        f"{importer} -> {imported}"
        for importer, targets in graph().items()
        for imported in targets
        if LAYERS[layer_of(imported)] > LAYERS[layer_of(importer)]
    ]
    assert upward == []


def test_every_task_module_is_in_a_group() -> None:
    loose = [
        name
        for name in modules()
        if layer_of(name) == "tasks" and name != "ctxrag.tasks" and task_group(name) not in TASK_GROUPS
    ]
    assert loose == []


def test_task_groups_import_only_lower_groups() -> None:
    upward = [
        f"{importer} -> {imported}"
        for importer, targets in graph().items()
        for imported in targets
        if (source := task_group(importer))
        and (target := task_group(imported))
        and source != target
        and TASK_GROUPS[target] >= TASK_GROUPS[source]
    ]
    assert upward == []


def test_no_import_cycles() -> None:
    edges = graph()
    cycles: list[list[str]] = []
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(edges[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    # a package's __init__ re-exporting its own modules is not a cycle of the design
    cycles = [
        cycle
        for cycle in cycles
        if not all(member.startswith(cycle[0] + ".") or member == cycle[0] for member in cycle)
    ]
    assert cycles == []


@pytest.mark.parametrize("name", sorted(modules()))
def test_modules_stay_small(name: str) -> None:
    lines = len(modules()[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{name}: {lines} lines"


@pytest.mark.parametrize("path", sorted(BENCHMARKS.glob("*.py")), ids=lambda path: path.name)
def test_benchmark_modules_stay_small(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"benchmarks/{path.name}: {lines} lines"


def test_only_storage_branches_on_the_backend() -> None:
    branches = []
    for name, path in modules().items():
        if layer_of(name) == "storage":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Compare, ast.MatchValue)):
                constants = {child.value for child in ast.walk(node) if isinstance(child, ast.Constant)}
                if constants & BACKEND_NAMES:
                    branches.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert branches == []


def test_the_checks_see_what_they_check() -> None:
    edges = graph()
    assert (
        "ctxrag.storage.index_store" in edges["ctxrag.tasks.retrieval.search"]
        and "ctxrag.tasks.stages.scoring" in edges["ctxrag.flows.evaluate"]
    )
    assert len(edges) > 40
    assert len(list(BENCHMARKS.glob("*.py"))) > 10
    assert layer_of("ctxrag.storage.index_store") == "storage" and layer_of("ctxrag.prefect_commands.serve") == "ctxrag"
    assert "ctxrag.tasks.common.models" in edges["ctxrag.tasks.load.cookbook"]  # a group's import of a lower one
    assert {task_group(name) for name in edges} - {None} == set(TASK_GROUPS)
