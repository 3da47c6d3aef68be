"""The package's shape, measured from its own imports (module-level and inside functions alike):
no import circles, nothing imported from a higher layer, recipes that never import each other,
command modules that import only the shared helper, and no module above 600 lines.

Layers, lowest first (see docs/architecture.md). A module may import its own layer and the ones below.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from mrcr_gen.recipes import RECIPES as REGISTRY

PACKAGE = Path(__file__).resolve().parents[1] / "mrcr_gen"
MAX_LINES = 600

# (layer, module-name prefixes); the first matching prefix (longest first) decides.
LAYERS: list[tuple[int, tuple[str, ...]]] = [
    (0, ("mrcr_gen._", "mrcr_gen.engines", "mrcr_gen.writers", "mrcr_gen.pool", "mrcr_gen.batch")),
    (1, ("mrcr_gen.validate", "mrcr_gen.eval", "mrcr_gen.generate")),
    (2, ("mrcr_gen._recipe", "mrcr_gen._request", "mrcr_gen._schemas")),
    (3, ("mrcr_gen.recipes.",)),
    (4, ("mrcr_gen.recipes",)),
    (5, ("mrcr_gen._api",)),
    (6, ("mrcr_gen.cli", "mrcr_gen.inspect", "mrcr_gen")),
]


def recipe_package(recipe: object) -> tuple[str, Path]:
    """(name, folder) of the package that holds a registered recipe (built-in or a plugin's own)."""
    module = importlib.import_module(type(recipe).__module__)
    package = importlib.import_module(module.__package__ or module.__name__)
    return package.__name__, Path(package.__file__ or "").parent


#: Every registered recipe's package: mrcr-gen's own and those installed through the entry point.
RECIPE_PACKAGES = dict(recipe_package(recipe) for recipe in REGISTRY)
RECIPES = tuple(RECIPE_PACKAGES)


def layer_of(module: str) -> int:
    matches = [(len(prefix), layer) for layer, prefixes in LAYERS for prefix in prefixes if module.startswith(prefix)]
    return max(matches)[1]


def modules(root: Path = PACKAGE) -> dict[str, tuple[Path, bool]]:
    found = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def imported_names(found: dict[str, tuple[Path, bool]]) -> dict[str, set[str]]:
    """module -> every name it imports, anywhere in its body, fully qualified (`package.module.name`)."""
    names: dict[str, set[str]] = {name: set() for name in found}
    for name, (path, is_package) in found.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = name.split(".") if is_package else name.split(".")[:-1]
                    here = here[: len(here) - node.level + 1]
                    base = ".".join(here + ([node.module] if node.module else []))
                targets = [f"{base}.{alias.name}" for alias in node.names]
            names[name].update(targets)
    return names


def import_graph(found: dict[str, tuple[Path, bool]]) -> dict[str, set[str]]:
    """module -> the package's modules it imports, anywhere in its body."""
    graph: dict[str, set[str]] = {name: set() for name in found}
    for name, targets in imported_names(found).items():
        for target in targets:
            while target not in found and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in found and target != name:
                graph[name].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


GRAPH = import_graph(modules())


def test_the_checker_sees_circles_and_function_level_imports(tmp_path: Path) -> None:
    package = tmp_path / "mrcr_gen"
    (package / "eval").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "eval" / "__init__.py").write_text("")
    (package / "eval" / "_a.py").write_text("from ._b import x\n")
    (package / "eval" / "_b.py").write_text("def f():\n    from ..recipes import R\n")
    (package / "recipes.py").write_text("from .eval._a import y\n")
    graph = import_graph(modules(package))
    assert graph["mrcr_gen.eval._b"] == {"mrcr_gen.recipes"}
    assert circles(graph) == [["mrcr_gen.eval._a", "mrcr_gen.eval._b", "mrcr_gen.recipes"]]


def test_no_import_circles() -> None:
    assert circles(GRAPH) == []


def test_no_upward_imports() -> None:
    upward = [
        f"{module} (layer {layer_of(module)}) imports {target} (layer {layer_of(target)})"
        for module, targets in GRAPH.items()
        for target in targets
        if layer_of(target) > layer_of(module)
    ]
    assert upward == []


def test_the_recipe_list_comes_from_the_registry() -> None:
    assert {"mrcr_gen.recipes.openai_mrcr", "mrcr_gen.recipes.mrcr_v2"} <= set(RECIPES)
    assert len(RECIPES) == len(REGISTRY)


def crossings(package: str, folder: Path, others: list[str]) -> list[tuple[str, str]]:
    """(module, name) of every import from `package` (in `folder`) into one of `others`."""
    return [
        (module, target)
        for module, targets in imported_names(modules(folder)).items()
        for target in targets
        if any(target == other or target.startswith(other + ".") for other in others)
    ]


@pytest.mark.parametrize("recipe", RECIPES)
def test_recipes_never_import_each_other(recipe: str) -> None:
    """Wherever a recipe's package lives (mrcr-gen's own or a plugin's), it imports no other recipe."""
    assert crossings(recipe, RECIPE_PACKAGES[recipe], [r for r in RECIPES if r != recipe]) == []


def test_the_crossing_check_sees_a_plugin_importing_a_built_in(tmp_path: Path) -> None:
    plugin = tmp_path / "mrcr_other"
    plugin.mkdir()
    (plugin / "__init__.py").write_text("")
    (plugin / "_recipe.py").write_text("def f():\n    from mrcr_gen.recipes.openai_mrcr._grade import grade\n")
    assert crossings("mrcr_other", plugin, list(RECIPES)) == [
        ("mrcr_other._recipe", "mrcr_gen.recipes.openai_mrcr._grade.grade")
    ]


def test_command_modules_import_no_recipe_private_name() -> None:
    """Commands reach recipes through the registry and their public declarations only."""
    private = [
        (module, target)
        for module, targets in imported_names(modules()).items()
        if module.startswith("mrcr_gen.cli")
        for target in targets
        if target.startswith("mrcr_gen.recipes.") and "._" in target.removeprefix("mrcr_gen.recipes.")
    ]
    assert private == []


def test_neutral_layers_never_name_a_recipe() -> None:
    """engines, validate and eval (and the core below them) import no recipe and no registry."""
    offending = [
        (module, target)
        for module, targets in GRAPH.items()
        if layer_of(module) <= 2
        for target in targets
        if target.startswith("mrcr_gen.recipes")
    ]
    assert offending == []


def test_command_modules_import_only_the_shared_helper() -> None:
    commands = [m for m in GRAPH if m.startswith("mrcr_gen.cli._") and m != "mrcr_gen.cli._common"]
    crossing = [(m, t) for m in commands for t in GRAPH[m] if t.startswith("mrcr_gen.cli.") and t != "mrcr_gen.cli._common"]
    assert crossing == []


def test_no_module_above_600_lines() -> None:
    long = {
        name: n
        for name, (path, _) in modules().items()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}
