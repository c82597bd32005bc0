"""The ids this CLI has shown shortened, remembered per endpoint, so that a shortened id copied from a
table is taken back without reading the store, however many jobs it holds (ids.py).

A file in the platform's cache directory (on Linux `$XDG_CACHE_HOME/punctual/shown-ids`, by default
`~/.cache/punctual/shown-ids`): one `endpoint<TAB>id` a line, the newest last, cut to its latest KEPT
bytes once it passes twice that. It is a cache: a file that cannot be read or written is passed over,
never an error.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

KEPT = 2_000_000  # bytes: about 25,000 ids, two hundred and fifty full tables


def cache_path() -> Path:
    import platformdirs  # (only the CLI needs it)

    return platformdirs.user_cache_path("punctual", appauthor=False) / "shown-ids"


class Shown:
    """The ids shown at `endpoint` (with the profile: two owners at one endpoint keep theirs apart;
    None: remember nothing, as before the CLI has connected)."""

    def __init__(self, endpoint: str | None, path: Path | None = None) -> None:
        self.endpoint = endpoint
        self._path = path
        # What this process has written already: `watch` shows the same ids every few seconds.
        self._recorded: set[str] = set()

    @property
    def path(self) -> Path:
        return self._path or cache_path()

    def record(self, ids: Iterable[str]) -> None:
        if self.endpoint is None:
            return
        new = [
            i for i in dict.fromkeys(ids) if i and i not in self._recorded and "\t" not in i and "\n" not in i
        ]
        if not new:
            return
        self._recorded.update(new)
        lines = "".join(f"{self.endpoint}\t{i}\n" for i in new)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as file:
                os.chmod(self.path, 0o600)
                file.write(lines)
                size = file.tell()
            if size > 2 * KEPT:
                self._trim()
        except OSError:
            pass

    def matching(self, accept: Callable[[str], bool]) -> set[str]:
        """The ids shown at this endpoint that `accept` takes."""
        if self.endpoint is None:
            return set()
        prefix = self.endpoint + "\t"
        try:
            with self.path.open(encoding="utf-8", errors="replace") as file:
                return {
                    line[len(prefix) :].rstrip("\n")
                    for line in file
                    if line.startswith(prefix) and accept(line[len(prefix) :].rstrip("\n"))
                }
        except OSError:
            return set()

    def _trim(self) -> None:
        data = self.path.read_bytes()
        kept = data[-KEPT:]
        kept = kept[kept.find(b"\n") + 1 :]  # from the first whole line
        # Written aside and renamed over: a reader sees the old file or the new, never half of one.
        handle, aside = tempfile.mkstemp(dir=self.path.parent, prefix=".shown-ids.")
        with os.fdopen(handle, "wb") as file:
            file.write(kept)
        os.replace(aside, self.path)


# Set by the command line (main) once it knows the endpoint; read at call time, as display.current is.
current = Shown(None)
