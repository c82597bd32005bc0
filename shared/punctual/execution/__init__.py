"""Running executions: the worker, one attempt, what follows a run, dead letters, pausing a running job."""
