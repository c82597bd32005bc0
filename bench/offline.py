"""Imported first by the offline benchmarks, before anything reads the environment.

Powertools is kept untraced (there is no X-Ray daemon) and quiet (stdout is for the JSON), unless
the caller set otherwise. Credentials are left alone: the scanner benchmark signs with dummy ones of
its own, and moto supplies its own to the cost benchmark.
"""

import os

for _name, _value in {
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_SERVICE_NAME": "punctual",
    "POWERTOOLS_METRICS_NAMESPACE": "Punctual",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
    "AWS_DEFAULT_REGION": "us-east-1",
}.items():
    os.environ.setdefault(_name, _value)
