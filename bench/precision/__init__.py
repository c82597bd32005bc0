"""Benchmark 1: precision, end to end, under the load shapes real schedules make. Prints JSON;
progress goes to stderr.

Real schedules pile up on round instants (`0 * * * *`, a batch of reminders for 10:00 sharp). So the
benchmark runs, through the HTTP API, against a webhook receiver in a process of its own:

- a burst: `--burst` one-time jobs due at one instant B, a minute boundary. Part of them
  (`--burst-scanned-share`) is created before the API's hand-off window, so a scanner tick
  enqueues them; the rest is created `--burst-handoff-lead` seconds before B, as fast as the
  clients go, and the API hands them off itself;
- cron jobs: `--cron` recurring jobs `* * * * *`, all firing at every :00 (B among them);
- steady load around them: `--rate` one-time jobs due each second from B - `--around` to
  B + `--around`, each created a lead ahead (`--handoff-window`, or `--scanned-window` for the
  `--scanned-share` the scanner enqueues), on a timetable, by `--threads` clients;
- a creation flood: `--flood-seconds` around B, `--threads` more clients create jobs (due an hour
  later, never run here) as fast as the API answers: the creation rate while all of it happens.

Lateness is measured where a user would see it: at the receiver, arrival time minus the
execution's scheduled time (`X-Punctual-Scheduled-At`), on the same clock as the stack's. The JSON
gives lateness per class (steady, burst, cron; by path), per second of scheduled time around B,
creation rates and latencies, early / missed / duplicate deliveries, a cross-check of a sample
through the API, and the local stack's targets (docs/benchmarks.md): a burst of 1,000 within 2 s of
its instant (100: within 500 ms), steady p99 <= 500 ms and max <= 2 s, creation >= 50 jobs/s, none
early, missed or doubled.
Beside them, `calibration`: how fast moto answered on this machine just before the run
(bench/calibration.py) and the load average, since a shared machine's figures vary with its load.

Local stack (started here as a subprocess on a free port, with a fresh data directory; stopped with
Ctrl-C's SIGINT at the end, on errors and on Ctrl-C too):

    make bench-precision                                   # the defaults, writes docs/lateness.png
    .venv/bin/python -m bench.precision --burst 1000 --tick-seconds 10
    .venv/bin/python -m bench.precision --burst 10 --cron 2 --rate 2 --around 3 --tick-seconds 5
    # a young stack: started 30 s before the burst's creations, spread over leads of 5 to 170 s
    .venv/bin/python -m bench.precision --stack-age 30 --burst-scanned-share 0 --burst-handoff-leads 5:170

A run lasts from the first creation (the scanned burst part, the hand-off window plus 30 s before
B) to B + `--around` + `--grace`: about 5 minutes at the defaults (tick one minute), 2 minutes with
`--tick-seconds 10`. The grace runs from the last due time or the last creation answered, whichever
is later; what has not arrived by then is waited for up to `--settle` seconds more (its lateness
counted as it comes) before it is counted missed.

Deployed stack (`--endpoint`, not testable here): requests to a non-loopback endpoint are signed
with SigV4 from the standard AWS credential chain (AWS_PROFILE, AWS_REGION or the region in the
execute-api URL), so the caller needs `execute-api:Invoke`. The workers must reach the receiver
from AWS: run the benchmark on a host with a public address (an EC2 instance, say), bind the
receiver on all interfaces and give the URL the jobs should call:

    .venv/bin/python -m bench.precision \\
        --endpoint https://abc123.execute-api.eu-west-1.amazonaws.com/v1 \\
        --receiver-host 0.0.0.0 --receiver-port 8080 --receiver-url http://203.0.113.7:8080

The deployed defaults (tick one minute, lookahead 90 s) give the same 180 s hand-off window as the
local stack's. Lateness then includes the network path from Lambda to the receiver and any skew
between the receiver's clock and AWS's. The cron jobs are cancelled at the end; the others stay in
the deployment's history until their retention ends (the flood's jobs run an hour later: noop).
"""

import sys


def log(message: str) -> None:
    """Progress, on stderr: the report alone goes to stdout."""
    print(f"[precision] {message}", file=sys.stderr, flush=True)
