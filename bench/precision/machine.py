"""What else the machine did during a run: this process's stalls, and the cores kept busy by the
local stack, by the benchmark and by everything else.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

STALL_INTERVAL_SECONDS = 0.05
STALL_THRESHOLD_SECONDS = 0.25
STALLS_LISTED = 10


class StallWatch:
    """This process's own pauses: a thread wakes every `interval` seconds and notes each wake-up later
    than `threshold`.

    The clients that create jobs run in this process. A second in which it was not scheduled (the
    process or the machine paused) is a second without creations that says nothing of the API, so
    the report says when this process stalled, beside the results; nothing is subtracted from them.
    """

    def __init__(
        self,
        interval: float = STALL_INTERVAL_SECONDS,
        threshold: float = STALL_THRESHOLD_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.interval = interval
        self.threshold = threshold
        self._monotonic = monotonic
        self._clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stall-watch", daemon=True)
        self.stalls: list[tuple[float, float]] = []  # (epoch seconds it began, seconds it lasted)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5.0)

    def _run(self) -> None:
        while True:
            before = self._monotonic()
            if self._stop.wait(self.interval):
                return
            self.note(self._monotonic() - before)

    def note(self, slept: float) -> None:
        """One wake-up, `slept` seconds after the last."""
        late = slept - self.interval
        if late >= self.threshold:
            self.stalls.append((self._clock() - late, late))  # from when it should have woken

    def report(self, burst_at: float) -> dict[str, Any]:
        longest = sorted(self.stalls, key=lambda stall: stall[1], reverse=True)[:STALLS_LISTED]
        return {
            "threshold_ms": round(self.threshold * 1000),
            "count": len(self.stalls),
            "seconds": round(sum(late for _, late in self.stalls), 2),
            # the longest, each as (seconds from the burst's instant when it began, its length in ms)
            "longest": [[round(began - burst_at, 1), round(late * 1000)] for began, late in longest],
        }


# ------------------------------------------------------------------------------------- CPU meter
class CpuMeter:
    """Cores kept busy between marks: by the local stack, by this process, by the whole machine (Linux).

    On a shared machine the difference says whether a run measured Punctual or a busy neighbour.
    """

    def __init__(self, stack_pid: int | None, receiver_pid: int | None = None) -> None:
        self.stack_pid = stack_pid
        self.receiver_pid = receiver_pid  # counted as the benchmark's
        self.marks: dict[str, dict[str, float | None]] = {}

    def mark(self, name: str) -> None:
        own = os.times()
        receiver = _process_cpu_seconds(self.receiver_pid) if self.receiver_pid else None
        self.marks[name] = {
            "wall": time.monotonic(),
            "stack": _process_cpu_seconds(self.stack_pid) if self.stack_pid else None,
            "self": own.user + own.system + (receiver or 0.0),
            "machine": _machine_busy_seconds(),
        }

    def between(self, start: str, end: str) -> dict[str, float | None]:
        first, last = self.marks[start], self.marks[end]
        wall = (last["wall"] or 0) - (first["wall"] or 0)

        def cores(key: str) -> float | None:
            before, after = first[key], last[key]
            if before is None or after is None or wall <= 0:
                return None
            return round((after - before) / wall, 2)

        busy = {key: cores(key) for key in ("stack", "self", "machine")}
        known = (busy["stack"] or 0) + (busy["self"] or 0)
        others = None if busy["machine"] is None else round(max(0.0, busy["machine"] - known), 2)
        return {
            "seconds": round(wall, 1),
            "local_stack_cores": busy["stack"],
            "benchmark_cores": busy["self"],
            "other_processes_cores": others,
        }


def _process_cpu_seconds(pid: int) -> float | None:
    """The process's CPU time and its children's (the local stack runs moto in a child process)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
    return own + sum(_process_cpu_seconds(int(child)) or 0.0 for child in children)


def _machine_busy_seconds() -> float | None:
    try:
        first = Path("/proc/stat").read_text().splitlines()[0].split()
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in first[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
