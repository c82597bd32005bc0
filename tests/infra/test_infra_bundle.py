"""The one Lambda code asset: what it holds, what it leaves to the runtime, and that it imports."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

from infra.components import bundling
from punctual.platform import resources
from tests.imports import HANDLERS, import_graph, package_modules, reached_from


@pytest.fixture(scope="module")
def asset(synthesized) -> Path:
    return synthesized.asset_dir(synthesized.function("api")[1]["Code"]["S3Key"])


def test_asset_holds_the_handlers_the_punctual_package_and_pure_python_dependencies(asset: Path):
    for dotted in resources.FUNCTIONS.values():
        module = dotted.rsplit(".", 1)[0]
        assert (asset / Path(*module.split("."))).with_suffix(".py").is_file(), module
    assert (asset / "punctual" / "platform" / "resources.py").is_file()
    assert (asset / "punctual" / "domain" / "cron" / "__init__.py").is_file()
    assert (asset / "tzdata" / "zoneinfo" / "Europe" / "Paris").is_file()


def test_asset_holds_the_runtime_and_nothing_that_runs_off_lambda(asset: Path):
    # Given the runtime: the modules of punctual that the handlers import, directly or not
    runtime = reached_from(HANDLERS, import_graph())
    # When the asset's copy of the package is read
    bundled = package_modules(asset / "punctual")
    # Then it holds those modules and no others: no CLI, local stack or capacity planner
    assert sorted(set(bundled) - runtime) == []
    assert sorted(runtime - set(bundled)) == []
    assert not [p for p in (asset / "punctual").rglob("*") if p.is_file() and p.suffix != ".py"]
    # and nothing else of the repository's: no esm, benchmarks or tests anywhere
    names = {p.stem for p in asset.rglob("*.py")} | {p.name for p in asset.rglob("*") if p.is_dir()}
    for unwanted in ("esm", "bench", "tests", "conftest", "cli", "local", "capacity"):
        assert unwanted not in names, unwanted
    handler_packages = {dotted.split(".")[1] for dotted in resources.FUNCTIONS.values()}
    assert {p.name for p in (asset / "functions").iterdir()} <= {"__init__.py", *handler_packages}


def test_asset_leaves_boto3_powertools_and_pydantic_to_runtime_and_layer(asset: Path):
    top_level = {p.name for p in asset.iterdir()}
    for provided in ("boto3", "botocore", "urllib3", "aws_lambda_powertools", "pydantic", "pydantic_core"):
        assert provided not in top_level
    assert not list(asset.rglob("__pycache__"))
    assert not [p for p in asset.rglob("*") if p.suffix in (".so", ".pyd")]


def test_distributions_the_runtime_provides_are_refused(tmp_path):
    with pytest.raises(ValueError, match="runtime"):
        bundling.copy_distribution("botocore", tmp_path)


def test_handlers_import_with_only_the_asset_and_what_runtime_and_layer_provide(asset: Path, tmp_path):
    # Given a path holding only the asset and the distributions the runtime and layer provide
    provided = tmp_path / "provided"
    provided.mkdir()
    for name in bundling.PROVIDED_AT_RUNTIME:
        try:
            distribution = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        for top in {f.parts[0] for f in distribution.files or () if f.parts[0] != ".."}:
            source = Path(str(distribution.locate_file(top)))
            if not (provided / top).exists() and source.exists():
                (provided / top).symlink_to(source)
    # When each handler module is imported in an interpreter without site-packages (-S)
    modules = [dotted.rsplit(".", 1)[0] for dotted in resources.FUNCTIONS.values()]
    environment = {
        "PYTHONPATH": os.pathsep.join([str(asset), str(provided)]),
        "AWS_DEFAULT_REGION": "us-east-1",
        "POWERTOOLS_TRACE_DISABLED": "1",
        "PATH": os.environ.get("PATH", ""),
    }
    script = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\n"
    result = subprocess.run(
        [sys.executable, "-S", "-c", script, *modules],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    # Then nothing is missing
    assert result.returncode == 0, result.stderr[-3000:]
