"""What imports what in Punctual's packages (shared/), read from the source with ast (nothing is imported).

Counted as an import: `import` and `from ... import` statements anywhere in a module (in functions
too: a lazy import is still a dependency), `importlib.import_module("a.literal")`, and a package that
imports each of its own modules through `pkgutil.iter_modules(__path__)` (the task types' registry).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIR = REPO_ROOT / "shared" / "punctual"
# The Lambda bundle, then the packages that run off Lambda.
PACKAGES = ("punctual", "punctual_cli", "punctual_client", "punctual_local")
HANDLERS = sorted((REPO_ROOT / "functions").glob("*/handler.py"))


def module_name(path: Path, root: Path = PACKAGE_DIR.parent) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules(package_dir: Path | None = None) -> dict[str, Path]:
    """Every module of the package under `package_dir` (of all PACKAGES by default), by dotted name."""
    dirs = [PACKAGE_DIR.parent / name for name in PACKAGES] if package_dir is None else [package_dir]
    return {module_name(p, d.parent): p for d in dirs for p in sorted(d.rglob("*.py"))}


def _imports(name: str, path: Path, known: Iterable[str]) -> set[str]:
    known = set(known)
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            found.add(target)
            # `from punctual import tasks` imports the module punctual.tasks
            found.update(f"{target}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            call = node.func
            if not isinstance(call.value, ast.Name):
                continue
            first = node.args[0] if node.args else None
            if (call.value.id, call.attr) == ("importlib", "import_module"):
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    found.add(first.value)
            elif (
                (call.value.id, call.attr) == ("pkgutil", "iter_modules")
                and is_package
                and isinstance(first, ast.Name)
                and first.id == "__path__"
            ):
                found.update(m for m in known if m.startswith(f"{name}.") and "." not in m[len(name) + 1 :])
    # Importing a.b.c runs a and a.b first.
    for target in list(found):
        parts = target.split(".")
        found.update(".".join(parts[:i]) for i in range(1, len(parts)))
    return {m for m in found if m in known and m != name}


def import_graph(modules: Mapping[str, Path] | None = None) -> dict[str, set[str]]:
    """Each module of the package -> the modules of the package it imports."""
    modules = package_modules() if modules is None else modules
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def reached_from(paths: Iterable[Path], graph: Mapping[str, set[str]]) -> set[str]:
    """The package's modules that importing the files at `paths` imports, directly or not."""
    todo = [m for p in paths for m in _imports("__main__", p, graph)]
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph[module])
    return seen


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan's algorithm). A
    module's import of its own package is left out: Python runs a package before its modules, so
    that is no cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph.get(node, ())):
            if node.startswith(f"{successor}."):
                continue
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found
