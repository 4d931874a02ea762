"""A batch's totals count every billed call once, across files.

Claude Code's `--resume` (and a fork) writes a new session file that starts with a copy of the
earlier session's records: the same response ids and usage. Each file of a batch is replayed
whole (it is a session of its own), so a call copied into another file would count twice in
the sum. A call whose response id appeared in another file belongs to the file where it came
first: the file whose first record's timestamp is earliest (ties by path). The total leaves
out the other files' shares of it: their calls, costs and the compactions the replay made at
those calls. Formats without a provider response id per call are not matched.
"""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from unbounded.evaluation.replay import ReplayReport
    from unbounded.evaluation.replay_recording import ReplayRecording

_HEAD_RECORDS = 64
"""Records read for a file's first timestamp (summary and snapshot lines carry none)."""


@dataclass(frozen=True, slots=True)
class BilledShares:
    """One replayed session's billed calls by response id, with each call's share of the
    session's figures: a few numbers a call, no history."""

    first_time: float | None
    """The time of the file's first record with one (seconds since the epoch)."""
    last_time: float | None
    """The time of the file's last billed request (a resume's copy keeps the times of what
    it copied, so its first record ties with the original's; its own turns come later)."""
    ids: array[int]
    """Each call's response id as a 64-bit digest (a chance collision: 1 in ~30 million in a
    million calls): eight bytes a call, not the string, held until the batch ends."""
    cost: array[float]
    """Our cost of each call (a call the replay does not follow: its fixed share, or 0)."""
    recorded: array[float]
    """Each call's recorded cost (NaN: not priced)."""
    replayed: bytes
    """1 for a call the replay followed (counted in the table's calls), 0 for one it did not."""
    compactions: array[int]
    """The compactions the replay made at each call (0 for a call it did not follow)."""


@dataclass(frozen=True, slots=True)
class Repeats:
    """The calls of one session that repeat calls of other files of the batch."""

    calls: int
    replayed_calls: int
    compactions: int
    """The compactions the replay of this file made at those calls."""
    cost: float
    recorded_cost: float
    recorded_priced: bool
    """Every repeated call had a recorded cost."""
    of: tuple[str, ...]
    """The files whose calls these are, in batch order."""


def first_record_time(path: Path) -> float | None:
    """The timestamp of the first record (of the file's first records) that has one."""
    from unbounded.model.entries import parse_timestamp

    with path.open("rb") as handle:
        for _, line in zip(range(_HEAD_RECORDS), handle, strict=False):
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):  # a line the reader skips too
                continue
            stamp = record.get("timestamp") if isinstance(record, dict) else None
            moment = parse_timestamp(stamp) if isinstance(stamp, str) else None
            if moment is not None:
                return moment.timestamp()
    return None


def billed_shares(path: Path, recording: ReplayRecording, report: ReplayReport) -> BilledShares:
    """The shares of a Claude Code file's replay: its replayed calls (in script order), then
    the billed calls it did not follow."""
    from hashlib import blake2b  # here: `--help` does not load it

    from unbounded.evaluation.call_series import CallSeries

    def digest(message_id: str) -> int:
        if message_id.startswith("line:") and message_id[5:].isdigit():
            # A response known only by its line number (no id, request id or uuid) is this
            # file's own: line 5 of another file is another call.
            message_id = f"{path}\0{message_id}"
        data = message_id.encode("utf-8", "surrogateescape")
        return int.from_bytes(blake2b(data, digest_size=8).digest(), "little")

    points = report.points
    pairs: Iterable[tuple[float, float | None]] = (
        points.costs()
        if isinstance(points, CallSeries)
        else ((p.cost, p.recorded_cost) for p in points)
    )
    cost, recorded = array("d"), array("d")
    for ours, paid in pairs:
        cost.append(ours)
        recorded.append(math.nan if paid is None else paid)
    replayed = len(cost)
    ids = array("Q", map(digest, recording.script.message_ids))
    for message_id, ours, paid in report.not_replayed_costs:
        ids.append(digest(message_id))
        cost.append(ours)
        recorded.append(math.nan if paid is None else paid)
    compactions = array("H", bytes(2 * len(ids)))
    for record in report.compaction_records:
        if 0 <= record.call < replayed:  # a record's call is its position in the script
            compactions[record.call] += 1
    times = [at for at in recording.script.request_times if math.isfinite(at)]
    return BilledShares(
        first_time=first_record_time(path),
        last_time=max(times) if times else None,
        ids=ids,
        cost=cost,
        recorded=recorded,
        replayed=bytes([1]) * replayed + bytes(len(ids) - replayed),
        compactions=compactions,
    )


def find_repeats(
    sessions: Sequence[tuple[str, BilledShares | None]],
) -> list[Repeats | None]:
    """For each session (its name and shares, None where its format has no response ids),
    the calls it repeats of other files (None: none). Each call belongs to the first file
    it appears in, by first record time, then last request time, then name."""
    order = sorted(
        ((at, shares) for at, (_, shares) in enumerate(sessions) if shares is not None),
        key=lambda item: _first(sessions[item[0]][0], item[1]),
    )
    owner: dict[int, int] = {}
    found: list[Repeats | None] = [None] * len(sessions)
    for at, shares in order:
        calls = replayed = compactions = 0
        cost = recorded = 0.0
        priced = True
        owners: set[int] = set()
        for position, message_id in enumerate(shares.ids):
            first = owner.setdefault(message_id, at)
            if first == at:
                continue
            owners.add(first)
            calls += 1
            replayed += shares.replayed[position]
            compactions += shares.compactions[position]
            cost += shares.cost[position]
            paid = shares.recorded[position]
            if math.isnan(paid):
                priced = False
            else:
                recorded += paid
        if calls:
            of = tuple(sessions[index][0] for index in sorted(owners))
            found[at] = Repeats(calls, replayed, compactions, cost, recorded, priced, of)
    return found


def _first(name: str, shares: BilledShares) -> tuple[bool, float, bool, float, str]:
    """The order of ownership: the earliest first record, then (a resume's copy ties with its
    original there) the earliest last request, then the name."""
    first, last = shares.first_time, shares.last_time
    return (first is None, first or 0.0, last is None, last or 0.0, name)


__all__ = ["BilledShares", "Repeats", "billed_shares", "find_repeats", "first_record_time"]
