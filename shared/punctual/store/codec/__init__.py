"""Items <-> domain objects: every attribute name the table's items carry, and how each is stored
(a job's index keys that are not fields of its own, and its tag entries: list_keys.py), one module
per kind of item:
- values.py        how times and optional values are stored, for every kind
- jobs.py          job items
- runs.py          a run recorded on its job's item: the job's outcome, and a one-time job's run
- executions.py    execution items
- markers.py       due markers, and those set aside in quarantine
- dead_letters.py  dead letters

Readers are lenient where a newer version may have written more (an outcome or a delivery record of
a form this one does not know reads as none), and take what older versions wrote (a job without a
schedule version is at 1; one without a retry or timeout takes its named task's or the defaults).
"""
