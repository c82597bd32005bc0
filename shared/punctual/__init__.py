"""Punctual: a serverless job scheduler for AWS. This package is the Lambda bundle, and nothing else.

Its folders follow an execution's flow (docs/architecture.md):
  api/ -> jobs/ (create, change, read) -> scheduling/ (due markers to the queue) -> execution/ (the
  worker) -> notify/ (telling of runs) and tasks/ (the targets) -> ports/ (what they need from
  storage and the queue) -> domain/ (records and rules) -> platform/ (config, clock, AWS clients,
  limits). store/ (DynamoDB and SQS) implements the ports; wiring.py, the composition root, alone
  imports it and puts the pieces together.
Off Lambda, never imported from here: punctual_cli (the command, the console, the capacity planner),
punctual_client (the HTTP client) and punctual_local (the local stack). tests/unit/test_package_layout.py
holds the folders to this; tests/infra/test_infra_bundle.py the bundle.
"""

__version__ = "0.1.0"
