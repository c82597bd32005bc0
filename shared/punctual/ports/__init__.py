"""Ports: what the stages need from storage and from the work queue, as typing.Protocol classes.

The stages (jobs, scheduling, execution, notify, api) are written against these, never against
punctual.store, the DynamoDB and SQS adapter that implements them; wiring.py passes the adapter in,
and mypy checks that it fits (structurally: the adapter does not name the ports). Each port lists the
methods the stages call, with the adapter's signatures, and the records they answer with:
- store.py       `Store`: one repository per aggregate, and the table's settings the stages read
- jobs.py        jobs, idempotency keys, named tasks
- executions.py  executions, their deliveries, dead letters
- markers.py     due markers, and the scanner's leases and positions
- packs.py       packs' leases
- queue.py       the work queue
- pages.py       a page of a list, and how much one filtered list request reads
"""
