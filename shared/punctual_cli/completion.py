"""Shell completion scripts for bash, zsh and fish, made from the command's own parser by shtab (so
they cannot drift from the commands and options). Options that take a time zone complete its IANA
names, listed in the script itself: a completion that started Python would wait on each Tab."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

SHELLS = ("bash", "zsh", "fish")

INSTALL = {
    "bash": "punctual completion bash > ~/.local/share/bash-completion/completions/punctual",
    "zsh": 'punctual completion zsh > "${fpath[1]}/_punctual"  (then: compinit)',
    "fish": "punctual completion fish > ~/.config/fish/completions/punctual.fish",
}

# Options whose value is an IANA time zone.
ZONE_OPTIONS = frozenset({"--tz", "--display-zone"})


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    import shtab  # (only this command needs these)

    from punctual.domain.schedules import zone_names

    # One function holds the names (letters, digits, _, +, - and /: safe unquoted in each shell),
    # defined once in the script's preamble; each zone option calls it.
    names = " ".join(sorted(zone_names()))
    zones = {
        "bash": "_punctual_zones_compgen",
        "zsh": "_punctual_zones",
        "fish": "(_punctual_zones)",
        "preamble": {
            "bash": f'_punctual_zones_compgen() {{\n  compgen -W "{names}" -- "$1"\n}}',
            "zsh": f"_punctual_zones() {{\n  compadd -- {names}\n}}",
            "fish": f"function _punctual_zones\n  printf '%s\\n' {names}\nend",
        },
    }
    for action in _actions(parser):
        if ZONE_OPTIONS.intersection(action.option_strings):
            action.complete = zones  # type: ignore[attr-defined]
    return str(shtab.complete(parser, shell=shell))


def _actions(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for action in parser._actions:
        yield action
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                yield from _actions(sub)
