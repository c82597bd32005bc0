"""How the CLI fits what it shows to the reader: the zone its times are shown in, the width of the
terminal, and ids shortened the way `git` shortens hashes (`--json` and `-q` keep them whole)."""

from __future__ import annotations

import os
import re
import shutil
import sys
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from punctual_cli import shown
from punctual_cli.common import UsageError

ELLIPSIS = "…"
# As `git log --oneline`: seven characters, more where seven are not unique among those shown.
MIN_ABBREV = 7
_JOB_ID = re.compile(r"job_[0-9a-f]{8,}")
_NARROWEST = 40  # a COLUMNS below this is not a terminal anyone reads a table in
# The IANA names of UTC itself, shown with `Z` as UTC is.
UTC_NAMES = frozenset({"UTC", "Etc/UTC", "Etc/UCT", "Etc/Universal", "Etc/Zulu", "UCT", "Universal", "Zulu"})


@dataclass(frozen=True)
class Display:
    """The zone times are shown in (`zone_name`: an IANA name; `marked`: how the reader chose it) and
    the width lines must fit in (None: no limit, as when writing to a file)."""

    zone_name: str = "UTC"
    width: int | None = None
    chosen_by: str = "default"

    @property
    def zone(self) -> tzinfo:
        return UTC if self.zone_name in UTC_NAMES else ZoneInfo(self.zone_name)

    def time(self, value: Any, zone_name: str | None = None) -> str:
        """An API timestamp as `2026-12-07 09:00:00 CET` in the display zone (or `zone_name`); UTC as
        `2026-12-07 08:00:00Z`. Text that is not a timestamp is shown as it is."""
        parsed = parse(value)
        if parsed is None:
            return "-" if not value else str(value)
        return stamp(parsed, zone_name or self.zone_name)

    def clock(self, instant: datetime) -> str:
        """The time of day of `instant` with its zone, for live lines: `09:00:12 CET`, `08:00:12Z`."""
        return stamp(instant, self.zone_name, date=False)


def stamp(instant: datetime, zone_name: str, *, date: bool = True) -> str:
    layout = "%Y-%m-%d %H:%M:%S" if date else "%H:%M:%S"
    if zone_name in UTC_NAMES:
        return instant.astimezone(UTC).strftime(layout) + "Z"
    local = instant.astimezone(ZoneInfo(zone_name))
    return f"{local.strftime(layout)} {abbreviation(local)}"


def abbreviation(local: datetime) -> str:
    """`CET`, `EDT`; where the zone has no letters (`+03`), the offset as `+03:00`."""
    name = local.tzname() or ""
    if name and name[0] not in "+-":
        return name
    return local.strftime("%z")[:3] + ":" + local.strftime("%z")[3:]


def parse(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


# Set by the command line (main) before anything is shown; read at call time, as common.clock is.
current = Display()


def check_zone(name: str, flag: str) -> str:
    """An IANA zone name, or a usage error naming the nearest ones."""
    from punctual_cli.suggest import zone_hint  # (difflib over every zone: only when needed)

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(f"{flag}: unknown time zone {name!r}{zone_hint(name)}") from None
    return name


def machine_zone() -> str:
    """The IANA name of this machine's zone (TZ, /etc/localtime...), UTC if it cannot be told."""
    import tzlocal

    try:
        name = str(tzlocal.get_localzone_name() or "UTC")
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, LookupError, OSError):
        return "UTC"
    return "UTC" if name in UTC_NAMES else name


def terminal_width(environ: Mapping[str, str] | None = None, stream: Any = None) -> int | None:
    """COLUMNS when set (as `ls` and `git` honour it), else the terminal's width, else None (output to
    a file or a pipe keeps every character)."""
    env = os.environ if environ is None else environ
    columns = env.get("COLUMNS", "").strip()
    if columns.isdigit():
        return max(int(columns), _NARROWEST)
    out = sys.stdout if stream is None else stream
    try:
        if out.isatty():
            return max(shutil.get_terminal_size().columns, _NARROWEST)
    except (AttributeError, ValueError, OSError):
        pass
    return None


# -- ids -----------------------------------------------------------------------------------------------


def abbreviations(ids: Iterable[str], minimum: int = MIN_ABBREV) -> dict[str, str]:
    """Each id's shortest prefix of at least `minimum` characters that no other id here starts with."""
    unique = sorted(set(ids))
    short: dict[str, str] = {}
    for i, text in enumerate(unique):
        shared = 0
        for neighbour in unique[max(i - 1, 0) : i + 2]:
            if neighbour != text:
                shared = max(shared, len(_common_prefix(text, neighbour)))
        short[text] = text[: max(minimum, shared + 1)]
    return short


def _common_prefix(a: str, b: str) -> str:
    size = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        size += 1
    return a[:size]


def job_ids(ids: Iterable[str]) -> dict[str, str]:
    """`job_` ids shortened (`job_1a2b3c4`); any other id is kept whole. What is shown shortened is
    remembered, to be taken back (ids.py)."""
    ids = list(ids)
    ours = [i for i in ids if _JOB_ID.fullmatch(i)]
    shown.current.record(ours)
    short = {i: "job_" + s for i, s in abbreviations([i[4:] for i in ours]).items()}
    return {i: short.get(i[4:], i) if i in ours else i for i in ids}


def execution_ids(ids: Iterable[str], job_id: str | None = None) -> dict[str, str]:
    """Execution ids shortened: what follows the job's id (which each extends), the job's id itself
    shortened when the executions are not all of `job_id`'s (`job_1a2b3c4.18f2a0c`). Remembered, as
    job ids are."""
    ids = list(ids)
    rests = {i: _split(i) for i in ids}
    shown.current.record(i for i, (_, rest) in rests.items() if rest)
    # At least the occurrence's instant whole (what precedes the schedule version): an id then reads
    # the same in every list, the occurrences of one job being apart by their instants.
    instant = max((len(rest.partition(".")[0]) for _, rest in rests.values() if rest), default=0)
    short_rest = abbreviations([rest for _, rest in rests.values() if rest], max(MIN_ABBREV, instant))
    short_job = job_ids([job for job, rest in rests.values() if rest])
    out: dict[str, str] = {}
    for i, (job, rest) in rests.items():
        if not rest:
            out[i] = i
        elif job == job_id:
            out[i] = short_rest[rest]
        else:
            out[i] = f"{short_job[job]}.{short_rest[rest]}"
    return out


def _split(execution_id: str) -> tuple[str, str]:
    job, dot, rest = execution_id.partition(".")
    return (job, rest) if dot and _JOB_ID.fullmatch(job) else (execution_id, "")


_SHORT_JOB_ID = re.compile(r"job_[0-9a-f]{4,19}")
_FULL_JOB_ID = re.compile(r"job_[0-9a-f]{20}")


def is_job_id(text: str) -> bool:
    """A job id whole, as the API draws them."""
    return bool(_FULL_JOB_ID.fullmatch(text))


def is_short_job_id(text: str) -> bool:
    """A job id as shown shortened (a full one has 20 hexadecimal digits)."""
    return bool(_SHORT_JOB_ID.fullmatch(text))


def matches_execution(short: str, execution_id: str, job_id: str | None = None) -> bool:
    """Whether a shortened execution id (as shown) names this execution."""
    if short == execution_id:
        return True
    job, rest = _split(execution_id)
    if not rest:
        return False
    if job_id == job and "." not in short.removeprefix(job + "."):
        return rest.startswith(short.removeprefix(job + "."))
    short_job, dot, short_rest = short.partition(".")
    return bool(dot) and job.startswith(short_job) and rest.startswith(short_rest)


# -- tables that fit -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """A table column: `shrink` the width it may be cut to (with …; None: never cut), `drop` the order
    in which columns give way when even cut they do not fit (1 first; 0: never)."""

    header: str
    shrink: int | None = None
    drop: int = 0


GAP = 2


def fit(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int | None) -> str:
    """Left-aligned columns two spaces apart (the last not padded), fitted to `width`: cut the columns
    that may be cut, then leave out the least needed ones, then cut each line (never wrap). Widths
    are the terminal's columns a cell takes (`columns_of`), of each cell as `escaped` shows it."""
    rows = [[escaped(cell) for cell in row] for row in rows]
    kept = list(range(len(columns)))
    natural = [max([len(columns[i].header), *(columns_of(row[i]) for row in rows)]) for i in kept]
    widths = list(natural)
    if width is not None:
        while True:
            widths = _shrunk(columns, natural, kept, width)
            if _total(widths, kept) <= width:
                break
            droppable = [i for i in kept if columns[i].drop]
            if not droppable:
                break
            kept.remove(min(droppable, key=lambda i: columns[i].drop))
    lines = [[columns[i].header for i in kept], *[[row[i] for i in kept] for row in rows]]
    out = []
    for line in lines:
        cells = [cut(cell, widths[i]) for cell, i in zip(line, kept, strict=True)]
        padded = [
            cell + " " * (widths[i] - columns_of(cell)) for cell, i in zip(cells[:-1], kept, strict=False)
        ]
        text = (" " * GAP).join([*padded, cells[-1]]).rstrip()
        out.append(cut(text, width) if width is not None else text)
    return "\n".join(out)


def _total(widths: Sequence[int], kept: Sequence[int]) -> int:
    return sum(widths[i] for i in kept) + GAP * (len(kept) - 1)


def _shrunk(columns: Sequence[Column], natural: Sequence[int], kept: Sequence[int], width: int) -> list[int]:
    """The widths with the columns that may be cut cut just enough, the widest first."""
    widths = list(natural)
    excess = _total(widths, kept) - width
    while excess > 0:
        cuttable = [
            i
            for i in kept
            if columns[i].shrink is not None
            and widths[i] > max(columns[i].shrink or 0, len(columns[i].header))
        ]
        if not cuttable:
            break
        widest = max(cuttable, key=lambda i: widths[i])
        widths[widest] -= 1
        excess -= 1
    return widths


def cut(text: str, width: int) -> str:
    """`text` in at most `width` of the terminal's columns, an ellipsis where it was cut."""
    if columns_of(text) <= width:
        return text
    kept, used = [], 0
    for char in text:
        used += _char_columns(char)
        if used > width - 1:
            break
        kept.append(char)
    return "".join(kept) + ELLIPSIS


# What a terminal acts on rather than shows: the C0 controls (ESC begins its escape sequences, BEL
# ends a window title), DEL and the C1 controls (U+009B is a CSI alone); and the characters that turn
# the direction of the text after them (embeddings, overrides, isolates, marks).
_ACTED_ON = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def escaped(text: str, keep: str = "") -> str:
    """`text` as a terminal shows it rather than acts on it: each control character as Python writes
    it in a string (`\\x1b`, `\\x9b`, `\\n`) and each direction control as its `\\u202e`, but those in
    `keep` (a block of lines keeps its newlines). What the CLI prints for people passes through this:
    an execution's error, a name or an API's message may hold anything."""
    if text.isprintable():
        return text

    def shown(match: re.Match[str]) -> str:
        char = match.group()
        if char in keep:
            return char
        code = ord(char)
        return _NAMED_ESCAPES.get(char) or (f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}")

    return _ACTED_ON.sub(shown, text)


def columns_of(text: str) -> int:
    """How many of a terminal's columns `text` takes: a wide (East Asian) character two, a combining
    or zero-width one none."""
    if text.isascii():
        return len(text)
    return sum(_char_columns(c) for c in text)


def _char_columns(char: str) -> int:
    if char.isascii():
        return 1
    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
