"""The folders show the flow: `punctual` is the Lambda bundle and nothing else, its folders are the
stages of an execution's flow, imports point down that flow, and the stages reach DynamoDB and SQS
through the ports alone (docs/architecture.md)."""

from __future__ import annotations

from collections.abc import Mapping

from tests.imports import HANDLERS, PACKAGES, cycles, import_graph, package_modules, reached_from

# The stages of `punctual`, from the top of the flow down. A module may import its own stage, the
# stages below it, and nothing above. `ports` are what the stages need from storage and the queue.
TIERS: tuple[frozenset[str], ...] = (
    frozenset({"api"}),
    frozenset({"jobs", "scheduling", "execution"}),
    frozenset({"notify", "tasks"}),
    frozenset({"ports"}),
    frozenset({"domain"}),
    frozenset({"platform"}),
)
# The adapter to DynamoDB and SQS, off the flow: it implements the ports, so it may import them and
# what they stand on; only the composition root builds it, and only it, the local stack and the tests
# import it (the stages are given it as the ports).
ADAPTER = "store"
COMPOSITION_ROOT = "punctual.wiring"
# Allowed at the top of `punctual`: the package itself and the composition root.
TOP_LEVEL = frozenset({"punctual", COMPOSITION_ROOT})
OFF_LAMBDA = tuple(p for p in PACKAGES if p != "punctual")
# Off the bundle, the one package that may import the adapter: the local stack runs and repairs it.
ADAPTER_USERS = frozenset({"punctual_local"})


def stage(module: str) -> str | None:
    """The stage (a folder of `punctual`) a module belongs to; None off the bundle or at its top."""
    parts = module.split(".")
    return parts[1] if parts[0] == "punctual" and len(parts) > 1 and module not in TOP_LEVEL else None


def rank(folder: str) -> int:
    return next(i for i, tier in enumerate(TIERS) if folder in tier)


def may_import(module: str, imported: str) -> bool:
    """Whether `module` may import `imported` (a module of shared/'s packages)."""
    here, there = stage(module), stage(imported)
    if there == ADAPTER:
        return here == ADAPTER or module == COMPOSITION_ROOT or module.split(".")[0] in ADAPTER_USERS
    if here is None or there is None:
        return True
    if here == ADAPTER:
        return rank(there) >= rank("ports")
    return rank(there) >= rank(here)


def wrong_imports(graph: Mapping[str, set[str]]) -> list[tuple[str, str]]:
    """(module, imported) pairs where a stage imports one above it in the flow, the adapter imports a
    stage, or anything but the composition root and the local stack imports the adapter."""
    return sorted((m, i) for m, imports in graph.items() for i in imports if not may_import(m, i))


def test_the_functions_import_every_module_of_the_bundle_and_nothing_else() -> None:
    # Given every module of shared/ and what imports what
    graph = import_graph()
    # When the modules the handlers import, directly or not, are gathered
    runtime = reached_from(HANDLERS, graph)
    # Then they are exactly the modules of `punctual`: a module no function imports belongs off it,
    # and no function reaches the CLI, the client or the local stack
    assert HANDLERS
    bundle = {m for m in graph if m.split(".")[0] == "punctual"}
    assert sorted(runtime - bundle) == [], "off-Lambda modules the functions import"
    assert sorted(bundle - runtime) == [], "modules no function imports: move them off the bundle"


def test_nothing_in_the_bundle_imports_the_cli_the_client_or_the_local_stack() -> None:
    graph = import_graph()
    wrong = {
        (module, imported)
        for module, imports in graph.items()
        if module.split(".")[0] == "punctual"
        for imported in imports
        if imported.split(".")[0] in OFF_LAMBDA
    }
    assert sorted(wrong) == []


def test_the_top_of_the_bundle_holds_only_the_composition_root_and_the_stages() -> None:
    modules = package_modules()
    top = {m for m in modules if m.count(".") == 1 and m.startswith("punctual.")}
    loose = {m for m in top if modules[m].name != "__init__.py"} - TOP_LEVEL
    assert sorted(loose) == []
    folders = {m.split(".")[1] for m in top if modules[m].name == "__init__.py"}
    assert folders == set().union(*TIERS, {ADAPTER})


def test_imports_point_down_the_flow_and_only_the_composition_root_imports_the_store() -> None:
    assert wrong_imports(import_graph()) == []


def test_the_functions_reach_the_store_only_through_the_composition_root() -> None:
    # Given what each handler imports itself (not through the modules it imports)
    graph = import_graph()
    unlinked: dict[str, set[str]] = {module: set() for module in graph}
    own = {path.parent.name: reached_from([path], unlinked) for path in HANDLERS}
    # Then none imports the store: wiring.py builds it and hands it over
    assert {name: sorted(m for m in mods if stage(m) == ADAPTER) for name, mods in own.items()} == {
        name: [] for name in own
    }


def test_an_import_up_the_flow_is_found() -> None:
    # Given a domain module that imports the API, a store module that imports a job operation, a
    # stage and a port that import the store, and the CLI that does too
    graph = {
        "punctual.domain.models": {"punctual.api.app", "punctual.platform.clock"},
        "punctual.store.jobs": {"punctual.jobs.creation", "punctual.domain.models", "punctual.ports.jobs"},
        "punctual.scheduling.scanner": {"punctual.store.keys", "punctual.ports.store"},
        "punctual.ports.store": {"punctual.store", "punctual.domain.models"},
        "punctual.api.app": {"punctual.jobs.service"},
        "punctual.wiring": {"punctual.api.app", "punctual.store.jobs"},
        "punctual_cli.main": {"punctual.store"},
        "punctual_local.stack": {"punctual.store", "punctual.wiring"},
    }
    # Then all are reported, and the downward imports, the store's of the ports, and the composition
    # root's and the local stack's of the store are not
    assert wrong_imports(graph) == [
        ("punctual.domain.models", "punctual.api.app"),
        ("punctual.ports.store", "punctual.store"),
        ("punctual.scheduling.scanner", "punctual.store.keys"),
        ("punctual.store.jobs", "punctual.jobs.creation"),
        ("punctual_cli.main", "punctual.store"),
    ]


def test_no_import_cycle_among_modules_nor_among_folders() -> None:
    # Given what imports what, module by module and folder by folder (a module stands for its
    # folder: punctual.jobs.creation for punctual.jobs, punctual_cli.main for punctual_cli)
    graph = import_graph()

    def unit(module: str) -> str:
        parts = module.split(".")
        return ".".join(parts[:2]) if parts[0] == "punctual" else parts[0]

    folders: dict[str, set[str]] = {}
    for module, imports in graph.items():
        folders.setdefault(unit(module), set()).update(unit(m) for m in imports if unit(m) != unit(module))
    # Then neither has a cycle (the CLI and the local stack once imported each other)
    assert cycles(graph) == []
    assert cycles(folders) == []


def test_the_walk_sees_lazy_and_registry_imports() -> None:
    # Given the graph, then an import inside a function counts, and so does the task registry's
    graph = import_graph()
    assert "punctual_local" in graph["punctual_cli.main"]  # importlib.import_module("punctual_local")
    assert "punctual.tasks.http" in graph["punctual.tasks"]  # pkgutil.iter_modules(__path__)
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
