"""The `punctual` command: runs on a laptop or in CI, never in a Lambda function.

`main` assembles the parser from the command groups and runs a command. One module a group:
`jobs` (and `preview`), `watch` (a job's executions, listed and live), `tasks`, `monitoring`
(notifications, retries, dead letters, the webhook receiver), `capacity.command`, and `connect`
(the options taken anywhere, the profile in use, `config`). `job_options` turns a job's options
into the API's request body; `output` prints an answer as JSON, ids or for people; `views` shows
jobs, executions and tasks, in the words of `formatting`, fitted to the terminal and in the
reader's zone by `display`. `ids` takes shortened ids back, `suggest` offers the nearest names,
`completion` makes shell completion scripts, and `common` holds what those modules share. The HTTP
client is punctual_client. `punctual local` imports the local stack (punctual_local) only when it is
asked for; nothing here is imported by the local stack.
"""
