"""What users of CLIs expect: completion scripts for bash, zsh and fish made from the parser, and a
config file of named profiles in the platform's config directory (--profile, PUNCTUAL_PROFILE)."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from punctual_cli import main as cli
from punctual_client import profiles
from punctual_client.auth import SigV4Auth
from tests.unit.cli.fake_api import FakeApi

Capsys = pytest.CaptureFixture[str]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts_are_made_from_the_parser_for_each_shell(shell: str, capsys: Capsys) -> None:
    # When the script for the shell is printed
    code = cli.main(["completion", shell])
    script = capsys.readouterr().out

    # Then it knows the commands, their actions and the options taken anywhere
    assert code == 0
    for word in ("jobs", "dead-letters", "executions", "redrive", "--display-zone", "--profile"):
        assert word in script, word
    # and the zones a schedule may name, for --tz and --display-zone, listed once
    assert script.count("Europe/Paris") == 1 and "America/Argentina/Buenos_Aires" in script
    # and the shell reads it without a syntax error where that shell is installed
    if shutil.which(shell):
        subprocess.run([shell, "-n", "/dev/stdin"], input=script, text=True, check=True, timeout=10)


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_a_profile_gives_the_endpoint_and_token_and_a_flag_or_variable_beats_it(
    cli_api: FakeApi, capsys: Capsys, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Given a config file whose `work` profile names the API and a token, and a default one that does not
    monkeypatch.setenv(
        "PUNCTUAL_CONFIG",
        str(
            _write(
                tmp_path / "config.toml",
                f'[profiles.default]\nendpoint = "http://127.0.0.1:1"\n\n'
                f'[profiles.work]\nendpoint = "{cli_api.url}"\ntoken = "tok-work"\n',
            )
        ),
    )
    cli_api.answer("GET", "/jobs", {"items": [], "next_cursor": None})

    # When jobs are listed with --profile, with PUNCTUAL_PROFILE, then with a token flag too
    by_flag = cli.main(["jobs", "list", "--profile", "work"])
    monkeypatch.setenv("PUNCTUAL_PROFILE", "work")
    by_variable = cli.main(["jobs", "list"])
    overridden = cli.main(["jobs", "list", "--token", "tok-flag"])
    capsys.readouterr()

    # Then the profile's endpoint and token were used, and the flag beat the profile's token
    assert (by_flag, by_variable, overridden) == (0, 0, 0)
    assert [r.headers["Authorization"] for r in cli_api.sent()] == [
        "Bearer tok-work",
        "Bearer tok-work",
        "Bearer tok-flag",
    ]


def test_an_unknown_profile_or_setting_is_a_usage_error_naming_what_there_is(
    capsys: Capsys, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = _write(tmp_path / "config.toml", '[profiles.work]\nendpont = "http://127.0.0.1:1"\n')
    monkeypatch.setenv("PUNCTUAL_CONFIG", str(path))

    missing = cli.main(["jobs", "list", "--profile", "prod"])
    missing_err = capsys.readouterr().err
    misspelt = cli.main(["jobs", "list", "--profile", "work"])
    misspelt_err = capsys.readouterr().err

    assert missing == 2 and "no profile 'prod'" in missing_err and "work" in missing_err
    assert misspelt == 2 and "unknown setting endpont" in misspelt_err and "endpoint" in misspelt_err


def test_an_aws_profile_signs_requests_to_a_deployed_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(
        tmp_path / "config.toml",
        '[profiles.prod]\nendpoint = "https://abc.execute-api.eu-west-1.amazonaws.com"\naws_profile = "ops"\n',
    )
    monkeypatch.setenv("PUNCTUAL_CONFIG", str(path))
    monkeypatch.delenv("PUNCTUAL_ENDPOINT", raising=False)
    args = argparse.Namespace(endpoint=None, token=None)

    client = profiles.connect(profiles.load_profile("prod"), args.endpoint, args.token)

    assert isinstance(client.auth, SigV4Auth)
    assert (client.auth.region, client.auth.aws_profile) == ("eu-west-1", "ops")


@pytest.mark.skipif(sys.platform != "linux", reason="XDG is Linux's; platformdirs follows each platform's")
def test_the_config_file_is_in_the_platforms_config_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("PUNCTUAL_CONFIG")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))

    assert profiles.config_path() == tmp_path / "punctual" / "config.toml"


def test_config_shows_the_file_and_the_profile_in_use(
    capsys: Capsys, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = _write(
        tmp_path / "config.toml", '[profiles.default]\ndisplay_zone = "Europe/Paris"\ntoken = "secret"\n'
    )
    monkeypatch.setenv("PUNCTUAL_CONFIG", str(path))

    code = cli.main(["config"])
    out = capsys.readouterr().out

    assert code == 0
    assert str(path) in out and "Europe/Paris" in out
    assert "secret" not in out  # a token is said to be set, never printed
    assert "times shown in UTC (chosen by PUNCTUAL_DISPLAY_ZONE)" in out
