"""What runs where: the modules the Lambda functions import are the runtime, and the runtime imports
nothing of the subpackages that run off Lambda (punctual.OFF_LAMBDA); no module imports itself
through others."""

from __future__ import annotations

import punctual
from tests.imports import HANDLERS, cycles, import_graph, off_lambda, package_modules, reached_from


def test_the_functions_import_every_module_outside_the_off_lambda_packages_and_none_inside() -> None:
    # Given the package's modules and what imports what
    graph = import_graph()
    # When the modules the handlers import, directly or not, are gathered
    runtime = reached_from(HANDLERS, graph)
    # Then they are exactly the modules outside the off-Lambda subpackages: a module no function
    # imports belongs in one of those, and none of those is imported by a function
    assert HANDLERS
    outside = {m for m in graph if not off_lambda(m, punctual.OFF_LAMBDA)}
    assert sorted(runtime - outside) == [], "off-Lambda modules the functions import"
    assert sorted(outside - runtime) == [], "modules no function imports: move them off Lambda"


def test_no_runtime_module_imports_an_off_lambda_one() -> None:
    # Given what each module imports, lazily or not
    graph = import_graph()
    # When the runtime's imports are read
    wrong = {
        (module, imported)
        for module, imports in graph.items()
        if not off_lambda(module, punctual.OFF_LAMBDA)
        for imported in imports
        if off_lambda(imported, punctual.OFF_LAMBDA)
    }
    # Then none reaches the CLI, the local stack or the capacity planner
    assert sorted(wrong) == []


def test_each_off_lambda_package_exists() -> None:
    modules = package_modules()
    for name in punctual.OFF_LAMBDA:
        assert f"punctual.{name}" in modules, name


def test_no_import_cycle_among_modules_nor_among_packages() -> None:
    # Given what imports what, module by module and package by package (a module stands for its
    # top-level subpackage: punctual.cli.main for punctual.cli)
    graph = import_graph()

    def unit(module: str) -> str:
        return ".".join(module.split(".")[:2])

    packages: dict[str, set[str]] = {}
    for module, imports in graph.items():
        packages.setdefault(unit(module), set()).update(unit(m) for m in imports if unit(m) != unit(module))
    # Then neither has a cycle (the CLI and the local stack once imported each other)
    assert cycles(graph) == []
    assert cycles(packages) == []


def test_the_walk_sees_lazy_and_registry_imports() -> None:
    # Given the graph, then an import inside a function counts, and so does the task registry's
    graph = import_graph()
    assert "punctual.local" in graph["punctual.cli.main"]  # importlib.import_module("punctual.local")
    assert "punctual.tasks.http" in graph["punctual.tasks"]  # pkgutil.iter_modules(__path__)
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
