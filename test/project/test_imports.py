"""No import loop among the package's modules, counting the imports inside functions too: a
loop hides which module builds on which (nodes/common <-> nodes/managed, nodes/stopping ->
cli -> nodes were two)."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "inertial_id"


def module_name(path: Path) -> str:
    """The dotted name of a module file of the package."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (at the top or in a function)."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def test_the_graph_sees_a_lazy_import() -> None:
    assert "inertial_id.tools.cli" in imports()["inertial_id.entry_points"]  # inside cli()


def test_no_import_loop() -> None:
    try:
        tuple(TopologicalSorter(imports()).static_order())
    except CycleError as exc:
        raise AssertionError(f"import loop: {' -> '.join(exc.args[1])}") from None


LAYERS = ("core", "io", "params", "nodes", "tools", "entry_points")
"""The package's layers, lowest first: a module imports only from its own layer or lower ones
(``core``: the maths; ``io``: files; ``params``: the parameter table; ``nodes``: ROS;
``tools``: the command line; ``entry_points``: the console scripts)."""


def layer(module: str) -> int:
    """The index in :data:`LAYERS` of a module of the package (``inertial_id.<layer>...``)."""
    return LAYERS.index(module.split(".")[1])


def test_every_module_is_in_a_layer() -> None:
    unplaced = sorted(m for m in imports() if m != "inertial_id"
                      and m.split(".")[1] not in LAYERS)
    assert not unplaced, f"modules outside {LAYERS}: {unplaced}"


def test_imports_never_go_up_a_layer() -> None:
    up = sorted(f"{a} -> {b}" for a, deps in imports().items() if a != "inertial_id"
                for b in deps if b != "inertial_id" and layer(b) > layer(a))
    assert not up, "imports from a higher layer: " + "; ".join(up)
