"""The stack's child processes, seen from the stack: moto's started, asked to restore, stopped.

moto's side of the conversation is moto/process.py, which says why it runs apart.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from punctual_local.clients import StackError
from punctual_local.persistence import DataDirError

HOST = "127.0.0.1"
MOTO_STOP_SECONDS = 5.0


class MotoChild:
    def __init__(self, port: int, data_dir: Path, *, reset: bool) -> None:
        self.port = port
        self.data_dir = data_dir
        self.reset = reset
        self.url = ""
        self._process: subprocess.Popen[str] | None = None

    def start(self) -> str:
        """Start moto's server on the data directory; returns its URL once it listens."""
        command = [sys.executable, "-m", "punctual_local.moto.process", "--port", str(self.port)]
        command += ["--data-dir", str(self.data_dir)] + (["--reset"] if self.reset else [])
        process = self._process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert process.stdout is not None
        word, _, value = process.stdout.readline().strip().partition(" ")
        if word != "port":
            process.wait(MOTO_STOP_SECONDS)
            if word == "data-error":
                raise DataDirError(value)
            raise StackError(f"cannot listen on {HOST}:{self.port} for moto: {value or 'it did not start'}")
        self.url = f"http://{HOST}:{value}"
        return self.url

    def restore(self, now_ms: int) -> dict[str, Any]:
        """moto's process reads the data directory into the tables just created; what it found."""
        process = self._process
        assert process is not None and process.stdin is not None and process.stdout is not None
        process.stdin.write(f"restore {now_ms}\n")
        process.stdin.flush()
        word, _, value = process.stdout.readline().strip().partition(" ")
        if word != "restored":
            raise DataDirError(value or "moto's process stopped while reading the data directory")
        return dict(json.loads(value))

    def stop(self) -> None:
        """Once every write is on disk, as each was before it was answered."""
        process, self._process = self._process, None
        if process is not None:
            end_child(process, MOTO_STOP_SECONDS)
            assert process.stdout is not None
            process.stdout.close()


def end_child(child: subprocess.Popen[str], seconds: float) -> None:
    """Close a child's standard input, its signal to stop; kill it if it has not within `seconds`."""
    assert child.stdin is not None
    try:
        child.stdin.close()
    except OSError:
        pass  # it has gone already
    try:
        child.wait(seconds)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
