"""`punctual`: the command-line client of Punctual's HTTP API (docs/api.md).

The parser, assembled from the command groups (each module's `register`: jobs, watch, tasks,
monitoring, capacity, connect), the commands that hand over to a package imported only when asked
for (`local`, `console`, `completion`), and the run: ids resolved, errors reported, an exit code.

Exit codes: 0 ok, 1 the API answered an error (4xx/5xx), 2 usage error, 3 the endpoint is unreachable.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Collection, Sequence
from typing import Any

from punctual import __version__
from punctual_cli import completion, connect, display, ids, jobs, monitoring, shown, suggest, tasks, watch
from punctual_cli.capacity import command as capacity_command
from punctual_cli.common import (
    EXIT_CONNECTION,
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    Handler,
    OptionAdder,
    UsageError,
)
from punctual_cli.job_options import BUILTIN_TYPES, named_task
from punctual_cli.output import say
from punctual_client import profiles
from punctual_client.endpoints import is_loopback
from punctual_client.errors import ApiError, ConfigurationError, ConnectionFailed, InvalidId
from punctual_client.transport import PunctualClient


def print_api_error(exc: ApiError, args: argparse.Namespace | None = None) -> None:
    # (the message may echo what was sent: an id or a name, control characters and all)
    say(f"punctual: error: {exc.message} (HTTP {exc.status})", sys.stderr)
    for line in exc.details:
        if line != exc.message:  # a single problem is usually the message itself
            say(f"  - {line}", sys.stderr)
    for hint in api_error_hints(exc, args):
        say(f"  {hint}", sys.stderr)


def api_error_hints(exc: ApiError, args: argparse.Namespace | None) -> list[str]:
    """What to do about an API error, in this CLI's words rather than HTTP's."""
    hints = []
    if exc.status in (401, 403) and args is not None:
        hints.append(
            "give your token with --token TOKEN or PUNCTUAL_TOKEN (the local stack's tokens are its "
            "PUNCTUAL_LOCAL_TOKENS); a deployed API takes AWS credentials (AWS_PROFILE, or a profile's "
            "aws_profile)"
        )
    field = exc.body.get("field") if isinstance(exc.body, dict) else None
    name = named_task(args) if args is not None and hasattr(args, "task") else None
    if name is not None and field == "task":
        close = suggest.did_you_mean(name, BUILTIN_TYPES)
        hints.append(
            f"--task {name} is neither a task type nor one of your named tasks{close} "
            f"(`punctual tasks` lists both; `punctual tasks create {name} --type TYPE` defines it)"
        )
    return hints


def cmd_console(client: PunctualClient, args: argparse.Namespace) -> int:
    """`punctual console`: the web console lives in punctual_cli.console, imported only when asked for."""
    console = importlib.import_module("punctual_cli.console")
    unreachable = (ConnectionFailed, ConfigurationError)
    return int(
        console.serve(client, port=args.port, open_browser=not args.no_browser, unreachable=unreachable)
    )


def cmd_completion(client: PunctualClient, args: argparse.Namespace) -> int:
    print(completion.script(build_parser(), args.shell))
    return EXIT_OK


def run_local(args: Sequence[str]) -> int:
    """`punctual local ...`: the local stack lives in punctual_local, imported only when asked for."""
    try:
        local = importlib.import_module("punctual_local")
    except ImportError as exc:
        say(f"punctual: error: the local stack is not available: {exc}", sys.stderr)
        return EXIT_FAILURE
    return int(local.main(list(args)) or 0)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="punctual",
        description="Schedule and watch jobs on Punctual.",
        epilog="exit codes: 0 ok, 1 API error, 2 usage error, 3 endpoint unreachable",
    )
    parser.add_argument("--version", action="version", version=f"punctual {__version__}")
    connect.add_global_options(parser, None)
    everywhere = connect.global_parent()

    def command(
        subparsers: Any,
        name: str,
        handler: Handler,
        help: str,
        *options: OptionAdder,
        anywhere: Collection[str] | None = None,
    ) -> Any:
        """A sub-command taking the global options, or only those in `anywhere` (a command that calls
        no API lists none of the connection's)."""
        parent = everywhere if anywhere is None else connect.global_parent(anywhere)
        sub = subparsers.add_parser(name, help=help, description=help, parents=[parent])
        for add_options in options:
            add_options(sub)
        sub.set_defaults(handler=handler)
        return sub

    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    job_commands = jobs.register(commands, command, everywhere)
    watch.register(commands, command)
    tasks.register(commands, command)
    monitoring.register(commands, job_commands, command, everywhere)
    capacity_command.register(commands, command)

    console = command(
        commands, "console", cmd_console, "look at and act on your jobs in a browser (127.0.0.1)"
    )
    console.add_argument(
        "--port", type=int, default=0, metavar="N", help="its port on 127.0.0.1 (default: a free one)"
    )
    console.add_argument("--no-browser", action="store_true", help="print the URL to open, open no browser")

    shells = command(
        commands,
        "completion",
        cmd_completion,
        "print the shell completion script for bash, zsh or fish; install it with, e.g., "
        + "; ".join(completion.INSTALL.values()),
        anywhere=(),
    )
    shells.add_argument("shell", choices=completion.SHELLS)
    connect.register(commands, command)

    # Listed for --help only: main() hands `punctual local ...` to punctual_local before parsing.
    commands.add_parser(
        "local", help="run all of Punctual on this machine (punctual local --help)", add_help=False
    )
    return parser


def _local_arguments(argv: Sequence[str]) -> list[str] | None:
    """The arguments after `local` when that is the command, else None."""
    index = 0
    while index < len(argv):
        token = argv[index]
        if token in connect.VALUED:
            index += 2
            continue
        if token.startswith("-"):
            index += 1
            continue
        return list(argv[index + 1 :]) if token == "local" else None
    return None


def resolve_ids(client: PunctualClient, args: argparse.Namespace) -> None:
    """Whole ids for the shortened ones the tables show (as `git` takes a shortened hash)."""
    if isinstance(getattr(args, "job", None), str):
        args.job = ids.job_id(client, args.job)
        if isinstance(getattr(args, "execution", None), str):
            args.execution = ids.execution_id(client, args.job, args.execution)
    elif isinstance(getattr(args, "execution", None), list) and args.execution:
        args.execution = ids.dead_letter_ids(client, args.execution)


def main(argv: list[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        # The reader went away (`punctual ... | head`): not a failure. Point stdout at nothing so that
        # Python's own flush at exit does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


def _main(argv: list[str] | None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    local_arguments = _local_arguments(arguments)
    if local_arguments is not None:
        return run_local(local_arguments)
    parser = build_parser()
    try:
        args = parser.parse_args(arguments)
    except SystemExit as exc:  # --help, --version and argparse's usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    client: PunctualClient | None = None
    try:
        profile = profiles.load_profile(args.profile)
        display.current = connect.display_for(args, profile)
        client = profiles.connect(profile, args.endpoint, args.token)
        shown.current = shown.Shown(f"{client.endpoint} {profile.name}")
        resolve_ids(client, args)
        handler: Handler = args.handler
        return handler(client, args)
    except (UsageError, ConfigurationError, InvalidId) as exc:
        say(f"punctual: error: {exc}", sys.stderr)
        return EXIT_USAGE
    except ApiError as exc:
        print_api_error(exc, args)
        return EXIT_FAILURE
    except ConnectionFailed as exc:
        say(f"punctual: error: {exc}", sys.stderr)
        if client is not None and is_loopback(client.endpoint):
            print(
                "  is the local stack running? start it with `punctual local` (or `make run`)",
                file=sys.stderr,
            )
        return EXIT_CONNECTION
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
