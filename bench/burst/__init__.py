"""Benchmark 4: the deployed pipeline under a burst, a discrete-event model. Prints JSON.

Not a measurement of AWS: a simulation of the scanner, SQS, the worker's event source mapping,
Lambda and the table by the scaling rules AWS documents, driven by the scanner's dispatch rate that
`make bench-scanner` measures. Every input is labelled measured, documented (with its page's title)
or assumed, and printed with the results. Lateness is an execution's start minus its scheduled
instant. Where two of AWS's pages disagree, the model takes the stricter figure and says so.

Two blocks answer the question asked of the AWS path:
- `one_instant_million`: 1,000,000 executions due at one instant onto the default deployment with
  the pre-scaling on (infra/settings.py's defaults, and `-c worker_min_pollers=2 -c
  burst_forecast_minutes=5 -c worker_prescale=true`), with the quotas that deployment can use raised
  (`quota_raises`) and, beside, at the default quotas; the goal is every execution started within 2 s.
- `steady_10k_per_s`: 10,000 executions a second, steady, onto the same deployment.
Then the older scenarios: a 1,000,000-execution minute onto an idle deployment, at one instant and
spread over the minute, with the mapping in standard mode, in provisioned mode at its floor, and
warmed ahead, at the default quotas and with the quotas raised.

    .venv/bin/python -m bench.burst                       # make bench-burst
    .venv/bin/python -m bench.burst --measure-scanner     # measure the scanner's rate first (~1 min)
"""
