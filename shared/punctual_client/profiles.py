"""The CLI's config file: named profiles, each an endpoint with how to sign in to it and the zone to
show times in. A TOML file in the platform's config directory (on Linux `$XDG_CONFIG_HOME/punctual/
config.toml`, by default `~/.config/punctual/config.toml`; PUNCTUAL_CONFIG names another):

    [profiles.default]
    display_zone = "Europe/Paris"

    [profiles.prod]
    endpoint = "https://abc123.execute-api.eu-west-1.amazonaws.com"
    aws_profile = "prod-admin"

`--profile NAME` or PUNCTUAL_PROFILE picks one (else `default`). A flag beats an environment variable,
which beats the profile.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from punctual_client.endpoints import default_endpoint
from punctual_client.errors import ConfigurationError
from punctual_client.transport import PunctualClient

DEFAULT_PROFILE = "default"


@dataclass(frozen=True)
class Profile:
    name: str = DEFAULT_PROFILE
    endpoint: str | None = None
    token: str | None = None  # a loopback endpoint's bearer token
    aws_profile: str | None = None  # the AWS CLI profile that signs requests to a deployed API
    region: str | None = None
    display_zone: str | None = None  # an IANA zone (default: this machine's)


SETTINGS = tuple(f.name for f in fields(Profile) if f.name != "name")


def config_path(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get("PUNCTUAL_CONFIG"):
        return Path(env["PUNCTUAL_CONFIG"])
    import platformdirs  # (only the CLI needs it)

    return platformdirs.user_config_path("punctual", appauthor=False) / "config.toml"


def load_profile(name: str | None, environ: Mapping[str, str] | None = None) -> Profile:
    """The profile `name` (else PUNCTUAL_PROFILE, else `default`); an empty one when the file or the
    default profile does not exist, a usage error when a named one does not."""
    env = os.environ if environ is None else environ
    chosen = name or env.get("PUNCTUAL_PROFILE") or DEFAULT_PROFILE
    path = config_path(env)
    try:
        with path.open("rb") as file:
            data = tomllib.load(file)
    except FileNotFoundError:
        data = {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigurationError(f"cannot read the config file {path}: {exc}") from None
    profiles = data.get("profiles") or {}
    if not isinstance(profiles, dict):
        raise ConfigurationError(f"{path}: [profiles.NAME] tables expected")
    settings = profiles.get(chosen)
    if settings is None:
        if chosen == DEFAULT_PROFILE:
            return Profile()
        known = ", ".join(sorted(profiles)) or "none"
        raise ConfigurationError(f"no profile {chosen!r} in {path} (profiles there: {known})")
    if not isinstance(settings, dict):
        raise ConfigurationError(f"{path}: [profiles.{chosen}] is not a table")
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise ConfigurationError(
            f"{path}: [profiles.{chosen}]: unknown setting {', '.join(unknown)} "
            f"(settings: {', '.join(SETTINGS)})"
        )
    wrong = sorted(key for key, value in settings.items() if not isinstance(value, str))
    if wrong:
        raise ConfigurationError(f"{path}: [profiles.{chosen}]: {', '.join(wrong)} must be text (in quotes)")
    return Profile(name=chosen, **settings)


def describe(profile: Profile, environ: Mapping[str, str] | None = None) -> str:
    """`punctual config`: where the file is, its profiles, and the one in use with each setting."""
    env = os.environ if environ is None else environ
    path = config_path(env)
    try:
        with path.open("rb") as file:
            names = sorted((tomllib.load(file).get("profiles") or {}).keys())
        where = str(path)
    except FileNotFoundError:
        names, where = [], f"{path} (none yet: write one to keep settings)"
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigurationError(f"cannot read the config file {path}: {exc}") from None
    lines = [
        f"config file: {where}",
        f"profiles:    {', '.join(names) or 'none'}",
        f"in use:      {profile.name}",
    ]
    for setting in SETTINGS:
        value = getattr(profile, setting)
        shown = "(set)" if setting == "token" and value else value or "-"
        lines.append(f"  {setting + ':':<14}{shown}")
    lines.append("(a flag beats an environment variable, which beats the profile)")
    return "\n".join(lines)


def connect(
    profile: Profile,
    endpoint: str | None = None,
    token: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> PunctualClient:
    """A client for what is given, else PUNCTUAL_ENDPOINT / PUNCTUAL_TOKEN, else the profile's, else
    the local stack."""
    env = os.environ if environ is None else environ
    endpoint = endpoint or env.get("PUNCTUAL_ENDPOINT") or profile.endpoint or default_endpoint(env)
    token = token or env.get("PUNCTUAL_TOKEN") or profile.token
    return PunctualClient.from_endpoint(
        endpoint, token=token, region=profile.region, aws_profile=profile.aws_profile
    )
