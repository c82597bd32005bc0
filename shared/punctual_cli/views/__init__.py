"""What the CLI shows people of the API's answers, one module per resource: jobs (with their
schedules, tasks and policies), executions (with dead letters and `watch`'s lines), and tasks.
The words they are built of are in punctual_cli.formatting."""
