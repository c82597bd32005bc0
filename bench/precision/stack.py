"""`punctual local` started and stopped for a benchmark run."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bench.precision import log
from punctual_client.errors import ConnectionFailed
from punctual_client.transport import PunctualClient

ROOT = Path(__file__).resolve().parents[2]


STACK_START_SECONDS = 60.0


STACK_STOP_SECONDS = 15.0  # it stops within 8 s (punctual_local.STOP_LIMIT_SECONDS), whatever runs


class LocalStack:
    """`punctual local` as a subprocess in its own session, so that Ctrl-C reaches only us."""

    def __init__(
        self, workdir: Path, extra_args: Sequence[str], log_path: Path | None, data_dir: Path | None = None
    ) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.data_dir = data_dir or workdir / "data"
        self.log_path = log_path or workdir / "stack.log"
        self.command = [sys.executable, "-m", "punctual_cli", "local", "--port", str(self.port)]
        self.command += ["--data-dir", str(self.data_dir), *extra_args]
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        for name in ("PUNCTUAL_LOCAL_TOKENS", "POWERTOOLS_LOG_LEVEL"):  # token `local`, the usual logs
            env.pop(name, None)
        with open(self.log_path, "ab") as output:
            self.process = subprocess.Popen(
                self.command,
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        probe = PunctualClient.from_endpoint(self.url, timeout=2)
        deadline = time.monotonic() + STACK_START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the local stack exited with {self.process.returncode}\n{self.tail()}")
            try:
                if probe.health():
                    return
            except ConnectionFailed:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the local stack did not answer /health in {STACK_START_SECONDS:.0f} s")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(STACK_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            log("the local stack did not stop after SIGINT; killing it")
            self.process.kill()
            self.process.wait(10)

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no output)"
        return "\n".join(text.splitlines()[-lines:])


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
