"""An independent model of Debian cron, for testing `punctual.domain.cron` against.

Written from Vixie cron's `entry.c` (parsing) and Debian's `cron.c` (the main loop), not from
Punctual's implementation: it parses with its own simple code, and steps the real clock one minute at
a time, as cron does, classifying each wake by how far the local wall clock moved since the last.
Slow by design (a minute a step), so only for windows of hours.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

_BOUNDS = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)]
_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
_NAMES: list[dict[str, int]] = [
    {},
    {},
    {},
    {m: i + 1 for i, m in enumerate(_MONTHS)},
    {d: i for i, d in enumerate(_DAYS)},
]


class Entry:
    def __init__(self, expression: str) -> None:
        fields = expression.lower().split()
        assert len(fields) == 5
        self.bits = [self._field(i, f) for i, f in enumerate(fields)]
        if 7 in self.bits[4]:
            self.bits[4].add(0)
        self.min_star = fields[0][0] == "*"
        self.hr_star = fields[1][0] == "*"
        self.dom_star = fields[2][0] == "*"
        self.dow_star = fields[4][0] == "*"

    def _field(self, index: int, text: str) -> set[int]:
        low, high = _BOUNDS[index]
        out: set[int] = set()
        for item in text.split(","):
            rng, _, step = item.partition("/")
            if rng == "*":
                a, b = low, high
            elif "-" in rng:
                x, y = rng.split("-")
                a, b = self._num(index, x), self._num(index, y)
            else:
                a = self._num(index, rng)
                b = high if step else a
            s = int(step) if step else 1
            out.update(range(a, b + 1, s))
        return out

    def _num(self, index: int, text: str) -> int:
        return _NAMES[index][text] if text in _NAMES[index] else int(text)

    def matches(self, tm: datetime) -> bool:
        dow = tm.isoweekday() % 7
        minute, hour, dom, month, dows = self.bits
        if not (tm.minute in minute and tm.hour in hour and tm.month in month):
            return False
        if self.dom_star or self.dow_star:
            return tm.day in dom and dow in dows
        return tm.day in dom or dow in dows

    @property
    def wild(self) -> bool:
        return self.min_star or self.hr_star


def _local_minute(ts: int, zone: ZoneInfo) -> int:
    offset = datetime.fromtimestamp(ts, zone).utcoffset()
    assert offset is not None
    return (ts + int(offset.total_seconds())) // 60


def _find_jobs(entry: Entry, vtime: int, do_wild: bool, do_nonwild: bool) -> bool:
    tm = datetime.fromtimestamp(vtime * 60, UTC)  # cron's gmtime() of its virtual second
    if not entry.matches(tm):
        return False
    return (do_nonwild and not entry.wild) or (do_wild and entry.wild)


def simulate(expression: str, zone: str, start: int, end: int) -> list[int]:
    """UTC seconds at which cron, started (settled) at `start`, runs the entry, up to `end`."""
    entry = Entry(expression)
    tz = ZoneInfo(zone)
    t = _next_wake(start, tz)
    virtual = _local_minute(t, tz) - 1
    runs: list[int] = []
    while t <= end:
        running = _local_minute(t, tz)
        diff = running - virtual
        hit = False
        if diff == 1:
            virtual = running
            hit = _find_jobs(entry, virtual, True, True)
        elif 0 < diff <= 5:
            while virtual < running:
                virtual += 1
                hit |= _find_jobs(entry, virtual, True, True)
        elif 5 < diff <= 180:
            hit |= _find_jobs(entry, running, True, False)
            while virtual < running:
                virtual += 1
                hit |= _find_jobs(entry, virtual, False, True)
        elif -180 < diff <= 0:
            hit = _find_jobs(entry, running, True, False)
        else:
            virtual = running
            hit = _find_jobs(entry, running, True, True)
        if hit:
            runs.append(t)
        t = _next_wake(t + 1, tz)
    return runs


def _next_wake(after: int, zone: ZoneInfo) -> int:
    """cron_sleep(): the next start of a local minute, by the offset in force when it goes to sleep."""
    offset = datetime.fromtimestamp(after - 1, zone).utcoffset()
    assert offset is not None
    off = int(offset.total_seconds())
    return -(-(after + off) // 60) * 60 - off
