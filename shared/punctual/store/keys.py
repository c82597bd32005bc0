"""Every key of the Punctual table, built and parsed here only.

- a job:            pk JOB#<job id>                  sk JOB
- an execution:     pk JOB#<job id>                  sk EXEC#<scheduled ms, 13 digits>#<execution id>
- a due marker:     pk DUE#<yyyymmddHHMM>#<shard>    sk <scheduled ms>#<execution id>
                    (or, due soon, pk DUE#SOON#<shard>: see `DueMarker.soon`; the markers of one
                    instant filed together: one group item, keyed as its first: codec/markers.py)
- a quarantined marker: pk QUARANTINE             sk <job id>#<scheduled ms>#<execution id>
- an idempotency key:   pk IDEM#<sha256 of owner and key>  sk IDEM
- a dead letter:        pk DEADLETTER#<owner>     sk <execution id>
- a scanner lease:      pk SCANNER                sk LEASE#<shard>
- a scanner position:   pk SCANNER                sk CHECKPOINT#<shard>
- a pack's lease:       pk PACK#<pack id>         sk PACK
- a change record:      pk CHANGED#<instant ms>   sk <job id>
- a batch's ends:       pk ENDS#<batch id>#<instant ms>  sk ENDS (store/batch_ends.py)
- a named task:         pk TASK#<owner digest>    sk TASK#<name>
- a batch's list entry: pk LIST#<batch id>        sk LIST, keyed in by_owner as its jobs would be
- a job's tag entry:    pk TAG#<owner digest>#<tag key>  sk <value digest>#<created ms>#<job id>
Index keys: a job's owner_pk OWNER#<owner>, owner_sk <created ms>#<job id> (by_owner), and while it
keeps a named task in use, task_ref <owner digest>#<name> (by_task). The other list indexes are keyed
by owner_pk and owner_sk with the job's name, stored only when given (by_name), and its flag, carried
only while it is paused, cancelled or failing (by_flag: list_keys.flag_of).

A marker's sort key is its place in its bucket (punctual.domain.buckets: the order the scanner reads).
"""

from __future__ import annotations

import hashlib
from datetime import datetime

from punctual.domain.buckets import bucket_minute, place_before, place_of, shard_of
from punctual.domain.models import DueMarker
from punctual.platform.timefmt import to_epoch_ms

Key = dict[str, str]

JOB_SK = "JOB"
JOB_PK_PREFIX = "JOB#"
EXECUTION_SK_PREFIX = "EXEC#"
MARKER_PK_PREFIX = "DUE#"
SOON_PK_PREFIX = "DUE#SOON#"
QUARANTINE_PK = "QUARANTINE"
SCANNER_PK = "SCANNER"
TASK_PREFIX = "TASK#"
TAG_PREFIX = "TAG#"
LIST_PK_PREFIX = "LIST#"
LIST_SK = "LIST"
# Above every sort key of an execution (every id sorts below U+FFFF).
_ABOVE_IDS = "\uffff"


def _ms(instant: datetime) -> str:
    return f"{to_epoch_ms(instant):013d}"


# ------------------------------------------------------------------- jobs
def job_pk(job_id: str) -> str:
    return f"{JOB_PK_PREFIX}{job_id}"


def job_key(job_id: str) -> Key:
    return {"pk": job_pk(job_id), "sk": JOB_SK}


def job_id_of(pk: str) -> str:
    """The job id of a job's (or its executions') partition key."""
    return pk.removeprefix(JOB_PK_PREFIX)


def owner_pk(owner: str) -> str:
    return f"OWNER#{owner}"


def owner_sk(created_at: datetime, job_id: str) -> str:
    return f"{_ms(created_at)}#{job_id}"


def job_id_of_owner_sk(sk: str) -> str:
    return sk.split("#", 1)[1]


def owner_digest(owner: str) -> str:
    """An owner as a key part: owners are IAM ARNs, up to 2 KB; a key has room for far less."""
    return hashlib.sha256(owner.encode()).hexdigest()[:32]


def task_ref(owner: str, name: str) -> str:
    """The by_task index key of the jobs of `owner` that use its named task `name`."""
    return f"{owner_digest(owner)}#{name}"


def tag_pk(owner: str, key: str) -> str:
    """The partition of `owner`'s tag entries for tag `key` (keys: 1-128 characters, no colon)."""
    return f"{TAG_PREFIX}{owner_digest(owner)}#{key}"


def tag_value_prefix(value: str) -> str:
    """Where a tag value's entries begin in their partition: a digest, as values may hold up to 1 KB
    (a sort key holds 1 KB in all); a list reads each job and checks its tag itself."""
    return hashlib.sha256(value.encode()).hexdigest()[:16] + "#"


def tag_key(owner: str, key: str, value: str, created_at: datetime, job_id: str) -> Key:
    """A job's entry for one of its tags, in the order the job's list shows: newest first."""
    return {"pk": tag_pk(owner, key), "sk": tag_value_prefix(value) + owner_sk(created_at, job_id)}


def job_id_of_tag_sk(sk: str) -> str:
    return sk.split("#", 2)[2]


def list_entry_owner_sk(created_at: datetime, batch_id: str) -> str:
    """A batch's list entry's by_owner sort key: above its jobs' own (`~` sorts after `job_`)."""
    return f"{_ms(created_at)}#~{batch_id}"


def list_entry_key(batch_id: str) -> Key:
    """The one list entry of a batch's jobs (store/jobs.py): in by_owner, where its jobs would be."""
    return {"pk": f"{LIST_PK_PREFIX}{batch_id}", "sk": LIST_SK}


def is_list_entry_pk(pk: str) -> bool:
    return pk.startswith(LIST_PK_PREFIX)


def batch_id_of(pk: str) -> str:
    return pk.removeprefix(LIST_PK_PREFIX)


# ------------------------------------------------------------- executions
def execution_sk(scheduled_at: datetime, execution_id: str) -> str:
    return f"{EXECUTION_SK_PREFIX}{_ms(scheduled_at)}#{execution_id}"


def execution_key(job_id: str, scheduled_at: datetime, execution_id: str) -> Key:
    return {"pk": job_pk(job_id), "sk": execution_sk(scheduled_at, execution_id)}


def is_execution_sk(sk: str) -> bool:
    return sk.startswith(EXECUTION_SK_PREFIX)


def executions_between(since: datetime | None, until: datetime | None) -> tuple[str, str]:
    """The sort-key range of a job's executions scheduled at or after `since` and before `until`."""
    low = EXECUTION_SK_PREFIX if since is None else f"{EXECUTION_SK_PREFIX}{_ms(since)}"
    high = (
        EXECUTION_SK_PREFIX + _ABOVE_IDS
        if until is None
        else f"{EXECUTION_SK_PREFIX}{to_epoch_ms(until) - 1:013d}#{_ABOVE_IDS}"
    )
    return low, high


# ---------------------------------------------------------------- markers
def bucket_pk(minute: datetime, shard: int) -> str:
    return f"{MARKER_PK_PREFIX}{bucket_minute(minute)}#{shard:03d}"


def soon_pk(shard: int) -> str:
    return f"{SOON_PK_PREFIX}{shard:03d}"


def is_marker_pk(pk: str) -> bool:
    return pk.startswith(MARKER_PK_PREFIX)


def marker_sk(marker: DueMarker) -> str:
    """A marker's place in its bucket (or soon partition)."""
    return place_of(marker)


def marker_key(marker: DueMarker, shard_count: int) -> Key:
    # A marker read back keeps the shard it was filed under, even if the shard count changed since.
    shard = marker.shard if marker.shard is not None else shard_of(marker.execution_id, shard_count)
    return {
        "pk": soon_pk(shard) if marker.soon else bucket_pk(marker.scheduled_at, shard),
        "sk": marker_sk(marker),
    }


def marker_place(pk: str) -> tuple[int, bool]:
    """The shard a marker's partition key names, and whether it is a soon partition."""
    return int(pk.rsplit("#", 1)[1]), pk.startswith(SOON_PK_PREFIX)


def sk_bound(instant: datetime) -> str:
    """A sort key between the markers due before `instant` and those due at or after it."""
    return place_before(instant)


def quarantine_key(marker: DueMarker) -> Key:
    return {"pk": QUARANTINE_PK, "sk": f"{marker.job_id}#{_ms(marker.scheduled_at)}#{marker.execution_id}"}


def quarantine_prefix(job_id: str) -> str:
    return f"{job_id}#"


def lease_key(shard: int) -> Key:
    return {"pk": SCANNER_PK, "sk": f"LEASE#{shard:03d}"}


def position_key(shard: int) -> Key:
    return {"pk": SCANNER_PK, "sk": f"CHECKPOINT#{shard:03d}"}


def shard_of_position(sk: str) -> int:
    return int(sk.split("#")[1])


def pack_key(pack_id: str) -> Key:
    return {"pk": f"PACK#{pack_id}", "sk": "PACK"}


ENDS_PK_PREFIX = "ENDS#"
ENDS_SK = "ENDS"


def ends_key(batch_id: str, instant: datetime) -> Key:
    """A batch's runs' ends at one instant (store/batch_ends.py)."""
    return {"pk": f"{ENDS_PK_PREFIX}{batch_id}#{to_epoch_ms(instant)}", "sk": ENDS_SK}


def change_pk(instant: datetime) -> str:
    return f"CHANGED#{to_epoch_ms(instant)}"


def change_key(instant: datetime, job_id: str) -> Key:
    return {"pk": change_pk(instant), "sk": job_id}


# ------------------------------------------------------------ bookkeeping
def idempotency_key(owner: str, key: str) -> Key:
    digest = hashlib.sha256(f"{owner}\0{key}".encode()).hexdigest()
    return {"pk": f"IDEM#{digest}", "sk": "IDEM"}


def dead_letter_pk(owner: str) -> str:
    return f"DEADLETTER#{owner}"


def dead_letter_key(owner: str, execution_id: str) -> Key:
    return {"pk": dead_letter_pk(owner), "sk": execution_id}


def task_pk(owner: str) -> str:
    return TASK_PREFIX + owner_digest(owner)


def task_key(owner: str, name: str) -> Key:
    return {"pk": task_pk(owner), "sk": TASK_PREFIX + name}
