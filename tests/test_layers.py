"""The package imports one way: an import scan over the AST of every module under ``hwsim/``.

Every import counts, wherever it stands (module level or inside a function), and so do
``importlib.import_module`` with a literal name and the ``"hwsim.x.y:Name"`` strings of the
registries (``hwsim.targets``, ``hwsim.schedule``), which load modules by name. ``from P import
name`` depends on ``P.name`` when that is a module, else on ``P``; a module does not depend on
the packages that contain it. Three rules: the modules form no cycle, no module imports a
module of a higher layer (``LAYERS``), and no machine's package imports another machine's.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "hwsim"

# Lowest first; a module may import its own layer and those below. A module belongs to the
# layer of the longest prefix that names it (``*.cli`` modules are all commands); "hwsim" is the
# package's own __init__ (the Python API), so a new top-level module must be given a layer.
LAYERS = (
    ("basics", ("hwsim.errors", "hwsim.version", "hwsim.shapes", "hwsim.blas", "hwsim.tosa_int")),
    ("input", ("hwsim.isa", "hwsim.traces")),
    ("timing", ("hwsim.timing", "hwsim.memory")),
    ("results", ("hwsim.results",)),           # writers of a run's Result
    ("targets", ("hwsim.targets",)),
    ("tosa", ("hwsim.tosa",)),
    ("schedule", ("hwsim.schedule",)),
    ("sweeps", ("hwsim.sweeps",)),
    ("api", ("hwsim",)),
    # the conformance runner loads hwsim.tosa.sut by name, as a shell runs the CLI
    ("commands", ("hwsim.cli", "hwsim.cli_shared", "hwsim.__main__", "hwsim.tosa.sut")),
)
REGISTRY_ENTRY = re.compile(r"(hwsim(?:\.\w+)+):\w+")       # "hwsim.targets.sme.machine:SmeMachine"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imported(node: ast.AST, here: str, is_package: bool, modules) -> list[str]:
    """The names a node imports, as modules of ``modules`` where they are one."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parent = here.split(".")[:len(here.split(".")) - node.level + is_package]
            base = ".".join(parent + ([node.module] if node.module else []))
        return [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                for a in node.names]
    if (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"):
        return [node.args[0].value]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        match = REGISTRY_ENTRY.fullmatch(node.value)
        return [match.group(1)] if match else []
    return []


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """Module -> the hwsim modules it imports."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for target in _imported(node, name, path.name == "__init__.py", modules):
                while target not in modules and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in modules and target.startswith("hwsim") and target != name:
                    targets.add(target)
        graph[name] = targets
    return graph


def layer(module: str) -> int:
    best, rank = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            inside = module.startswith(prefix + ".") and prefix != "hwsim"   # the root: itself
            if (module == prefix or inside) and len(prefix) > best:
                best, rank = len(prefix), i
    if module.endswith(".cli"):
        return len(LAYERS) - 1
    assert rank is not None, f"{module} is in no layer of LAYERS"
    return rank


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_scan_sees_every_kind_of_import():
    graph = import_graph()
    assert "hwsim.errors" in graph["hwsim.timing.params"]               # module level
    assert "hwsim.targets.hmx.machine" in graph["hwsim.targets"]        # registry string
    assert "hwsim.schedule.gap9" in graph["hwsim.schedule"]
    assert "hwsim.tosa.v080.flatbuf" in graph["hwsim.tosa.loaders"]     # inside a function
    assert len(graph) > 130


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_the_scan_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_module_has_a_layer():
    for module in import_graph():
        layer(module)
    assert layer("hwsim.schedule.cli") == layer("hwsim.cli") > layer("hwsim.schedule")
    assert layer("hwsim.tosa.sut") > layer("hwsim.schedule") > layer("hwsim.tosa.ir")


@pytest.mark.parametrize("name", [name for name, _ in LAYERS])
def test_no_import_from_a_higher_layer(name):
    rank = [n for n, _ in LAYERS].index(name)
    graph = import_graph()
    upward = sorted(f"{m} -> {t} ({LAYERS[layer(t)][0]})" for m, targets in graph.items()
                    if layer(m) == rank for t in targets if layer(t) > rank)
    assert upward == []


MACHINES = ("gap9", "hmx", "sme")


@pytest.mark.parametrize("package", ["hwsim.targets", "hwsim.schedule"])
def test_no_machine_imports_another(package):
    def machine(module):
        parts = module.split(".")
        return parts[2] if len(parts) > 2 and parts[2] in MACHINES else None

    crossing = sorted(f"{m} -> {t}" for m, targets in import_graph().items()
                      if m.startswith(package + ".") and machine(m) for t in targets
                      if t.startswith(package + ".") and machine(t) not in (None, machine(m)))
    assert crossing == []


# the modules every machine package has, for the same role each (docs/adding-a-machine.md)
ROLES = ("machine.py", "params.py", "state.py", "semantics.py")


@pytest.mark.parametrize("machine", MACHINES)
def test_every_machine_keeps_its_roles_in_the_same_modules(machine):
    files = {path.name for path in (PACKAGE / "targets" / machine).glob("*.py")}
    assert sorted(set(ROLES) - files) == []
