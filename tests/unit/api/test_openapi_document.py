"""The OpenAPI document the API serves lists the same operations, each with the same parameters,
request body and answers, as `data/openapi_operations.json` records. The record was taken before the
API module became a package; an intended change to the API updates it:

    .venv/bin/python -m tests.unit.api.test_openapi_document > tests/unit/api/data/openapi_operations.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

RECORD = Path(__file__).parent / "data" / "openapi_operations.json"
METHODS = ("get", "put", "post", "patch", "delete")


def operations(document: dict[str, Any]) -> dict[str, Any]:
    """Each operation as `METHOD /path` -> what a client depends on: its id, summary, parameters,
    request body and the status codes it answers with their schemas; and the models' names."""
    found: dict[str, Any] = {}
    for path, item in document["paths"].items():
        for method in METHODS:
            if method not in item:
                continue
            operation = item[method]
            found[f"{method.upper()} {path}"] = {
                "operationId": operation.get("operationId"),
                "summary": operation.get("summary"),
                "parameters": sorted(
                    (
                        {
                            "in": p["in"],
                            "name": p["name"],
                            "required": p.get("required", False),
                            "schema": p.get("schema"),
                        }
                        for p in operation.get("parameters", [])
                    ),
                    key=lambda p: (p["in"], p["name"]),
                ),
                "requestBody": operation.get("requestBody"),
                "responses": {
                    code: answer.get("content", {}).get("application/json", {}).get("schema")
                    for code, answer in sorted(operation.get("responses", {}).items())
                },
            }
    return {"operations": found, "schemas": sorted(document.get("components", {}).get("schemas", {}))}


def served_document(api_format: str) -> dict[str, Any]:
    from punctual.api.app import http_app, rest_app

    app = http_app if api_format == "http" else rest_app
    return json.loads(app.get_openapi_json_schema())


def test_each_format_serves_the_recorded_operations() -> None:
    # Given the operations recorded before the API became a package
    recorded = json.loads(RECORD.read_text())
    for api_format in ("http", "rest"):
        # When the document is built as the API serves it
        summary = operations(served_document(api_format))
        # Then it has the same operations, each the same, and the same models
        assert sorted(summary["operations"]) == sorted(recorded["operations"]), api_format
        for key, operation in recorded["operations"].items():
            assert summary["operations"][key] == operation, key
        assert summary["schemas"] == recorded["schemas"]


if __name__ == "__main__":
    json.dump(operations(served_document("http")), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
