"""The `punctual` command and its HTTP client: runs on a laptop or in CI, never in a Lambda function.

`main` parses the command line and runs the commands, `client` speaks the HTTP API, `formatting`
shows its answers to people, `monitoring` holds the notification, dead-letter and live-tail
commands, and `common` what those modules share. `punctual local` imports the local stack
(punctual.local) only when it is asked for; nothing here is imported by the local stack.
"""
