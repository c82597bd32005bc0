"""What the local stack prints once it is ready: where its API and moto are, and what to try."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from punctual.platform.observability import logger
from punctual_local.clients import REGION


def show(
    *,
    port: int,
    tokens: dict[str, str],
    data_dir: Path,
    tick_seconds: int,
    json_logs: bool,
    api_url: str,
    moto_url: str,
    ready: float,
    lookahead: int,
    restored: int,
    requeued: int,
    table: str,
) -> None:
    token, owner = next(iter(tokens.items()))
    tick = "every minute" if tick_seconds >= 60 else f"every {tick_seconds} s"
    data = f"{data_dir.resolve()}"
    if restored:
        data += f"  ({restored} items restored, {requeued} queued messages kept)"
    env = ""
    if port != 8765:
        env += f"PUNCTUAL_PORT={port} "
    if token != "local":
        env += f"PUNCTUAL_TOKEN={token} "
    others = f"  (+{len(tokens) - 1} more from PUNCTUAL_LOCAL_TOKENS)" if len(tokens) > 1 else ""
    lines = [
        f"Punctual local stack ready in {ready:.1f} s",
        f"  API      {api_url}",
        f"  token    {token}  (owner {owner}){others}",
        f"  AWS      {moto_url}  (moto, on a new port at each start: any credentials, region {REGION})",
        f"           AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test aws --endpoint-url {moto_url} "
        f"--region {REGION} dynamodb scan --table-name {table}",
        f"  data     {data}",
        f"  scanner  {tick}, lookahead {lookahead} s",
        "Try:",
        f"  curl -s -H 'Authorization: Bearer {token}' -H 'Content-Type: application/json' "
        f'-d \'{{"task": {{"type": "noop"}}, "schedule": {{"type": "now"}}}}\' {api_url}/jobs',
        f"  {env}{_cli()} jobs create --in 10s --task noop",
        f"  {env}{_cli()} watch <job id>",
        f"  {env}{_cli()} console        (a web page of your jobs and runs)",
        "Ctrl-C stops (jobs and history are kept in the data directory).",
    ]
    stream = sys.stderr if json_logs else sys.stdout
    print("\n".join(lines), file=stream, flush=True)
    if json_logs:
        logger.info(
            "local stack ready",
            extra={
                "api_url": api_url,
                "moto_url": moto_url,
                "data_dir": data,
                "ready_s": round(ready, 2),
            },
        )


def _cli() -> str:
    """How to call the CLI from here: `punctual` when it is on PATH, else its path (.venv/bin/...)."""
    if shutil.which("punctual"):
        return "punctual"
    script = Path(sys.executable).parent / "punctual"
    if not script.exists():
        return "punctual"
    try:
        return str(script.relative_to(Path.cwd()))
    except ValueError:
        return str(script)
