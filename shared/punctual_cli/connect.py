"""What every command runs with: the options accepted anywhere on the command line (as `gh` and
`kubectl` take theirs), and the client and display they make together with the environment and the
config file's profile (a flag beats an environment variable, which beats the profile); and
`punctual config`, which shows them."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Collection, Mapping
from typing import Any

from punctual_cli import display
from punctual_cli.common import EXIT_OK
from punctual_cli.output import say
from punctual_client import profiles
from punctual_client.transport import PunctualClient

# The options that take a value, for reading the command line before it is parsed (`punctual local`).
VALUED = ("--endpoint", "--token", "--profile", "--display-zone")


def add_global_options(
    parser: argparse.ArgumentParser, default: Any, only: Collection[str] | None = None
) -> None:
    """--endpoint, --token, --profile, --display-zone, --json and -q (or those named in `only`, by
    their long names): before or after any command word.

    Every parser but the top one has SUPPRESS defaults, so that a value given before a command word is
    not overwritten by a sub-command's default.
    """
    flag = False if default is None else default
    wanted = (
        set(only)
        if only is not None
        else {"--endpoint", "--token", "--profile", "--display-zone", "--json", "--quiet"}
    )
    if "--endpoint" in wanted:
        parser.add_argument(
            "--endpoint",
            default=default,
            help="API base URL (env PUNCTUAL_ENDPOINT; default http://127.0.0.1:$PUNCTUAL_PORT or :8765). "
            "Loopback endpoints take a bearer token, others are called signed with SigV4",
        )
    if "--token" in wanted:
        parser.add_argument(
            "--token",
            default=default,
            help="bearer token for a local endpoint (env PUNCTUAL_TOKEN; default local)",
        )
    if "--profile" in wanted:
        parser.add_argument(
            "--profile",
            default=default,
            help=f"the config file's profile to use (env PUNCTUAL_PROFILE; default {profiles.DEFAULT_PROFILE}; "
            "`punctual config` shows the file)",
        )
    if "--display-zone" in wanted:
        parser.add_argument(
            "--display-zone",
            metavar="ZONE",
            default=default,
            help="IANA zone to show times in (env PUNCTUAL_DISPLAY_ZONE, or the profile's display_zone; "
            "default this machine's zone)",
        )
    if "--json" in wanted:
        parser.add_argument("--json", action="store_true", default=flag, help="print the API's JSON")
    if "--quiet" in wanted:
        parser.add_argument(
            "-q",
            "--quiet",
            action="store_true",
            default=flag,
            help="print only ids, one a line (for scripts)",
        )


def global_parent(only: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The global options (or those named in `only`) as an argparse parent for a sub-command."""
    parent = argparse.ArgumentParser(add_help=False)
    add_global_options(parent, argparse.SUPPRESS, only)
    return parent


def display_for(
    args: argparse.Namespace, profile: profiles.Profile, environ: Mapping[str, str] | None = None
) -> display.Display:
    env = os.environ if environ is None else environ
    for name, source in (
        (getattr(args, "display_zone", None), "--display-zone"),
        (env.get("PUNCTUAL_DISPLAY_ZONE"), "PUNCTUAL_DISPLAY_ZONE"),
        (profile.display_zone, f"profile {profile.name}"),
    ):
        if name:
            zone, chosen_by = display.check_zone(name, source), source
            break
    else:
        zone, chosen_by = display.machine_zone(), "this machine"
    return display.Display(zone_name=zone, width=display.terminal_width(env), chosen_by=chosen_by)


def cmd_config(client: PunctualClient, args: argparse.Namespace) -> int:
    say(profiles.describe(profiles.load_profile(args.profile)))
    # (what is called: a flag or the environment may name another endpoint than the profile)
    say(f"calling {client.endpoint}")
    shown = display.current
    print(f"times shown in {shown.zone_name} (chosen by {shown.chosen_by})")
    return EXIT_OK


def register(commands: Any, command: Callable[..., Any]) -> None:
    """Add `config` to the parser (`command` makes one, as build_parser does)."""
    command(
        commands,
        "config",
        cmd_config,
        "show the config file (named profiles: endpoint, token or aws_profile, region, display_zone) "
        "and the profile in use",
    )
