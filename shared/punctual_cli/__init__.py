"""The `punctual` command and its HTTP client: runs on a laptop or in CI, never in a Lambda function.

`main` parses the command line and runs the commands, `client` speaks the HTTP API, `formatting`
shows its answers to people (fitted to the terminal and in the reader's zone by `display`),
`monitoring` holds the notification and dead-letter commands, `watch` the live views, `connect`
the options taken anywhere and what they make with the environment and the `config` file's
profiles, `ids` takes shortened ids back, `suggest` offers the nearest names, `completion` makes
shell completion scripts, and `common` holds what those modules share. `punctual local` imports
the local stack (punctual_local) only when it is asked for; nothing here is imported by the local
stack.
"""
