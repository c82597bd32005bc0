"""Punctual: a serverless job scheduler for AWS.

What runs where:
- The runtime, what the Lambda functions (functions/*/handler.py) import and all that their bundle
  holds: the modules at this package's top level and the subpackages `api` (the HTTP API) and
  `tasks` (the task types).
- Off Lambda, on a laptop or in CI (OFF_LAMBDA; never imported by the runtime):
  `cli` (the `punctual` command and its HTTP client), `client` (the Python client: typed results
  over the command's transport), `console` (`punctual console`: a web page on
  127.0.0.1 over the API), `local` (the local stack: moto, the API server,
  the event-source-mapping pollers), `capacity` (the capacity planner: prices and measured figures
  as data, the model, its rendering). They may import the runtime; the runtime imports none of them.
tests/unit/test_package_layout.py holds the package to this; tests/infra/test_infra_bundle.py the
bundle.
"""

__version__ = "0.1.0"

# Subpackages left out of the Lambda bundle (infra/components/bundling.py).
OFF_LAMBDA = ("capacity", "cli", "client", "console", "local")
