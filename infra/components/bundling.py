"""The one Lambda code asset, built without Docker and without the network.

The asset holds the `functions` package, the `punctual` package (the runtime, and nothing else: the
CLI, the Python client and the local stack are packages of their own) and the few pure-Python
distributions that neither the Lambda runtime (boto3) nor the Powertools layer (Powertools,
pydantic, aws-xray-sdk) provides. Those are copied from the virtualenv that runs the CDK app,
so `cdk synth` works offline from a fresh clone after `make install`.
"""

from __future__ import annotations

import importlib.metadata
import shutil
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import AssetHashType, BundlingOptions, ILocalBundling
from aws_cdk import aws_lambda as lambda_

REPO_ROOT = Path(__file__).resolve().parents[2]

# Top-level package name in the asset -> its source directory in the repository.
SOURCE_PACKAGES = {
    "functions": REPO_ROOT / "functions",
    "punctual": REPO_ROOT / "shared" / "punctual",
}

# Third-party distributions the functions need that the runtime and the layer lack. tzdata backs
# zoneinfo where the runtime image has no system time zone database (zoneinfo prefers the system's).
BUNDLED_DISTRIBUTIONS = ("tzdata",)

# Provided by the Lambda runtime or the Powertools layer. A bundled copy would shadow theirs (the
# runtime's boto3 must keep the botocore, urllib3 and friends it was released with), so bundling
# one is refused rather than risked.
PROVIDED_AT_RUNTIME = frozenset(
    {
        "boto3",
        "botocore",
        "s3transfer",
        "jmespath",
        "urllib3",
        "python-dateutil",
        "six",
        "aws-lambda-powertools",
        "aws-xray-sdk",
        "wrapt",
        "pydantic",
        "pydantic-core",
        "annotated-types",
        "typing-extensions",
        "typing-inspection",
    }
)

_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", ".mypy_cache", ".pytest_cache")
_COMPILED_SUFFIXES = (".so", ".pyd", ".dylib")


def build_asset(output_dir: Path) -> None:
    """Lay out the Lambda code asset in `output_dir`."""
    for name, source in SOURCE_PACKAGES.items():
        if not (source / "__init__.py").is_file():
            raise FileNotFoundError(f"{source} is not a Python package")
        shutil.copytree(source, output_dir / name, ignore=_IGNORED, dirs_exist_ok=True)
    for distribution in BUNDLED_DISTRIBUTIONS:
        copy_distribution(distribution, output_dir)


def copy_distribution(name: str, output_dir: Path) -> None:
    """Copy an installed pure-Python distribution (its modules and dist-info) into `output_dir`."""
    canonical = name.lower().replace("_", "-")
    if canonical in PROVIDED_AT_RUNTIME:
        raise ValueError(f"{name} comes from the Lambda runtime or the Powertools layer; do not bundle it")
    try:
        distribution = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        raise RuntimeError(
            f"{name} is not installed in the virtualenv that runs the CDK app; it must be a project "
            "dependency (pyproject.toml) so that `make install` provides it"
        ) from None
    for file in distribution.files or ():
        # Entries outside site-packages (console scripts in bin/) and byte code are not needed.
        if file.parts[0] == ".." or "__pycache__" in file.parts:
            continue
        if file.name.endswith(_COMPILED_SUFFIXES):
            raise ValueError(f"{name} has compiled code ({file}); it must be built for the Lambda runtime")
        target = output_dir / Path(*file.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(str(file.locate())), target)


@jsii.implements(ILocalBundling)
class _LocalBundling:
    # jsii hands over the BundlingOptions positionally; they are not needed to copy files.
    def try_bundle(self, output_dir: str, options: Any = None, **_: Any) -> bool:
        build_asset(Path(output_dir))
        return True


def lambda_code(runtime: lambda_.Runtime) -> lambda_.Code:
    """The code asset shared by every function of the stack."""
    return lambda_.Code.from_asset(
        str(SOURCE_PACKAGES["functions"]),
        # Hash what is deployed, not the source directory: the asset also depends on shared/ and on
        # the versions installed in the virtualenv.
        asset_hash_type=AssetHashType.OUTPUT,
        bundling=BundlingOptions(
            # Required by the API but never run: local bundling always succeeds or raises.
            image=runtime.bundling_image,
            local=_LocalBundling(),
        ),
    )
