"""`punctual console`: a web console on 127.0.0.1 over the public API (docs/console.md).

Jobs, one job with its runs and their lateness, failures, named tasks and the coming hour, in a
browser, for the local stack or a deployed API alike: the server forwards the page's calls through
the CLI's client, which holds the credentials. Off Lambda (punctual.OFF_LAMBDA).
"""

from __future__ import annotations

import sys
import webbrowser
from collections.abc import Callable
from typing import TextIO

from punctual_cli.console.server import Api, ConsoleServer, Session

__all__ = ["Api", "ConsoleServer", "Session", "serve"]


def serve(
    api: Api,
    *,
    port: int = 0,
    open_browser: bool = True,
    unreachable: tuple[type[Exception], ...] = (OSError,),
    out: TextIO | None = None,
    opener: Callable[[str], object] = webbrowser.open,
) -> int:
    """Serve the console until interrupted; prints the URL (on a line of its own) that signs a
    browser in, and opens it unless told not to."""
    out = out or sys.stdout
    server = ConsoleServer(api, port=port, unreachable=unreachable)
    print(f"Punctual console for {api.endpoint} (Ctrl-C to stop); open:", file=out)
    print(server.url, file=out, flush=True)
    if open_browser:
        opener(server.url)
    try:
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
