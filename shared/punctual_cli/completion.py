"""Shell completion scripts for bash, zsh and fish, made from the command's own parser by shtab (so
they cannot drift from the commands and options)."""

from __future__ import annotations

import argparse

SHELLS = ("bash", "zsh", "fish")

INSTALL = {
    "bash": "punctual completion bash > ~/.local/share/bash-completion/completions/punctual",
    "zsh": 'punctual completion zsh > "${fpath[1]}/_punctual"  (then: compinit)',
    "fish": "punctual completion fish > ~/.config/fish/completions/punctual.fish",
}


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    import shtab  # (only this command needs it)

    return str(shtab.complete(parser, shell=shell))
