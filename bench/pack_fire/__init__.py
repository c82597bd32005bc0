"""Benchmark: a pack's fire stage from one process, on loopback. Prints JSON.

What a worker does with a pack at its instant (punctual.execution.firing.Firing): its members on a
thread pool of min(members, FIRE_THREADS), each holding until the instant, then running the `http`
task (its address guard, its headers, a connection a call) against a receiver in a child process on
127.0.0.1. For each pack size (`--sizes`, 1,000 and 500 by default), from the instant: when the last
call began, when the receiver had the last request, when the last answer came back; the caller's CPU
seconds (this process, all its threads); the peak threads and open file descriptors.

Then the same packs prepared (`prepared_packs`): each member's task prepared first, side by side on
the pool, as the PackRunner does while it holds (tasks.prepare: its address checked, its connection
opened; at most PREPARED_CONNECTIONS_MAX held open, the rest start cold), then held until the
instant, 1 s after they are all ready, and launched from one thread (each request sent on its
connection, Firing._launch) before the members' threads take the answers. `cold_vs_prepared` sets
the two side by side, each figure the median of `--rounds` rounds (cold and prepared in turn): from
the instant to the last request received, and the CPU a start costs from the hold on (a prepared
one's preparing apart).

Then what else a member costs the same process's CPU: the pack's body made and read
(domain/work.py `Pack.to_body`, `read_body`, at `pack_size` entries), and a DynamoDB call through
boto3 (an UpdateItem, as a claim or an outcome is) to a stand-in on loopback answering at once, called
from as many threads as the pack's, so that the burst model (bench.burst) can charge a member's start
and its writes to the worker's share of a vCPU. Plain HTTP: a TLS handshake would add to the
webhook's figure; `--tls` measures the webhooks over https instead (a certificate made for the run,
trusted beside the system's authorities, as the task loads them for each connection). Nothing
leaves the machine.

    .venv/bin/python -m bench.pack_fire                     # packs of 1,000 and 500, cold and prepared
    .venv/bin/python -m bench.pack_fire --tls --dynamodb-calls 0
"""

from bench import offline  # noqa: F401  (first: it sets up the environment)
