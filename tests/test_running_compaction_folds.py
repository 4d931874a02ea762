"""The compaction's receipt and facts ledger kept up to date call by call (`RunningReceipt`,
`RunningFacts`) give the bytes the from-scratch walks give, whatever the history did.

Two levels, both seeded random: the folds alone over random records of odd shapes (repeated
tool ids and uuids, results before their calls or without one, records without a uuid,
content that is not a list), advanced in random steps across compactions, rewinds and an
index that starts over, read at random cuts against `compaction_receipt` / `extract_facts`;
and whole `Session`s (tool results, clearing, several compactions, a rewind, a reload from
disk) run twice, once as they run and once with the folds refused (the old walks), every
summary request, prepared request and the transcript (boundaries with their receipts,
summaries with their ledgers) compared byte for byte.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
from collections.abc import Callable, Collection, Iterator
from datetime import datetime, timedelta, timezone
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from summaries import nine_section_summary

from unbounded.compaction.facts import RunningFacts, extract_facts, facts_ledger_for
from unbounded.model.entries import Entry, create_compact_boundary
from unbounded.model.profile import MODEL_PROFILE
from unbounded.model.request import ProviderRequest
from unbounded.policy import Policy
from unbounded.providers.base import ModelResponse
from unbounded.recall.index import TranscriptIndex
from unbounded.recall.receipts import RunningReceipt, _mentioned, write_compaction_receipt
from unbounded.session import Session, SessionConfig

# -- the folds alone ---------------------------------------------------------------------------

TOOLS = ("Read", "Bash", "Edit", "Write", "Grep", "TodoWrite", "str_replace_based_edit_tool")


class Unprintable:
    """A value whose text cannot be read: the walks raise on it, and so must the folds."""

    def __str__(self) -> str:
        raise ValueError("unprintable")


class Records:
    """Random records of every shape the folds must take as the walks take them."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.calls: list[str] = []
        self.uuids: list[str] = []
        self.serial = 0

    def _uuid(self) -> str | None:
        rng = self.rng
        roll = rng.random()
        if roll < 0.04:
            return None
        if roll < 0.07 and self.uuids:
            return rng.choice(self.uuids)  # a repeated uuid
        self.serial += 1
        uuid = f"u-{self.serial}"
        self.uuids.append(uuid)
        return uuid

    def _tool_use(self) -> dict[str, Any]:
        rng = self.rng
        name = rng.choice(TOOLS)
        roll = rng.random()
        if self.calls and roll < 0.08:
            tool_id = rng.choice(self.calls)  # a provider repeating an id
        elif roll < 0.14:
            tool_id = f"t-later-{rng.randrange(50)}"  # a call after its result
        else:
            tool_id = f"t-{self.serial}-{rng.randrange(10**6)}"
        self.calls.append(tool_id)
        path = f"/repo/src/m{rng.randrange(9)}.py"
        tool_input: dict[str, Any] = {
            "Read": {"file_path": path},
            "Bash": {"command": f"pytest  -q tests/t{rng.randrange(6)}.py\n" * rng.randint(1, 2)},
            "Edit": {"file_path": path, "old_string": "a", "new_string": "b"},
            "Write": {"file_path": path, "content": "x"},
            "Grep": {"pattern": "step", "path": "/repo"},
            "TodoWrite": {"todos": [{"content": "do it", "status": rng.choice(("pending", "done"))}]},
            "str_replace_based_edit_tool": {"command": "view", "path": path},
        }[name]
        return {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}

    def _result(self) -> Any:
        rng = self.rng
        roll = rng.random()
        if roll < 0.1 or not self.calls:
            tool_id = f"t-later-{rng.randrange(50)}"  # its call is not there (yet)
        else:
            tool_id = rng.choice(self.calls[-6:])
        content: Any = (
            f"line {rng.randrange(999)}\n" * rng.randint(1, 30)
            if rng.random() < 0.6
            else [{"type": "text", "text": f"out {rng.randrange(99)}"}]
        )
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id, "content": content}
        if rng.random() < 0.2:
            block["is_error"] = True
        return MappingProxyType(block) if rng.random() < 0.03 else block

    def entry(self) -> Entry:
        """One record."""
        rng = self.rng
        roll = rng.random()
        uuid = self._uuid()
        if roll < 0.35:
            blocks: list[Any] = [{"type": "text", "text": f"step {self.serial}"}]
            blocks += [self._tool_use() for _ in range(rng.randint(0, 2))]
            data: dict[str, Any] = {
                "type": "assistant",
                "message": {"role": "assistant", "content": blocks, "id": f"msg-{self.serial}"},
            }
        elif roll < 0.7:
            results: list[Any] = [self._result() for _ in range(rng.randint(1, 3))]
            if rng.random() < 0.1:
                results.append({"type": "text", "text": "Keep the tests green, always."})
            data = {"type": "user", "message": {"role": "user", "content": results}}
        elif roll < 0.8:
            text = rng.choice(
                (
                    "Please always run the tests before you commit.",
                    "<command-name>/clear</command-name>",
                    f"Now fix module {rng.randrange(9)}.",
                    "[Request interrupted by user]",
                )
            )
            content: Any = text if rng.random() < 0.5 else [{"type": "text", "text": text}]
            data = {"type": "user", "message": {"role": "user", "content": content}}
            if rng.random() < 0.15:
                data["isMeta"] = True
        elif roll < 0.85:
            data = {
                "type": "attachment",
                "attachment": {"type": "todo", "content": [{"content": "a", "status": "pending"}]},
            }
        elif roll < 0.9:
            data = {"type": "system", "subtype": "informational", "content": "note"}
        elif roll < 0.925:
            data = {"type": "user", "message": {"role": "user", "content": {"odd": "shape"}}}
        elif roll < 0.93:
            text: Any = Unprintable() if rng.random() < 0.3 else "ok"  # the walks refuse it
            data = {"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": text}]}}
        elif roll < 0.95:
            data = {"type": "assistant", "message": {"role": "assistant", "content": "plain text"}}
        else:
            data = {
                "type": "user",
                "message": {"role": "user", "content": [self._result(), "a bare string"]},
            }
        if uuid is not None:
            data["uuid"] = uuid
        return Entry(data)

    def boundary(self) -> Entry:
        """A compact boundary (with a summary-like follower the caller adds)."""
        boundary = create_compact_boundary("auto", 1000)
        boundary.data["uuid"] = f"b-{self.serial}"
        self.serial += 1
        return boundary


def _receipt(
    view: list[Entry],
    kept: list[Entry],
    index: TranscriptIndex,
    cleared: Collection[str],
    running: RunningReceipt | None,
) -> str:
    boundary = create_compact_boundary("auto", 1)
    receipt = write_compaction_receipt(
        boundary,
        view,
        kept,
        index=index,
        summary_text="We edited /repo/src/m1.py and m2.py.",
        summarizer="test",
        already_cleared=cleared,
        running=running,
    )
    return json.dumps(receipt)


def _kept(rng: random.Random, view: list[Entry]) -> list[Entry]:
    """What a compaction keeps: mostly a tail, sometimes nothing, a head, or a copy."""
    roll = rng.random()
    cut = rng.randint(0, len(view))
    if roll < 0.6:
        return view[cut:]
    if roll < 0.75:
        return []
    if roll < 0.85:
        return view[:cut]
    return [Entry(dict(entry.data)) for entry in view[cut:]]  # equal records, other objects


def _outcome(read: Callable[[], str]) -> str:
    """What `read` gives, or the error it raises (odd content the walks refuse)."""
    try:
        return read()
    except ValueError as error:
        return f"ValueError: {error}"


def _drive_folds(seed: int) -> Iterator[tuple[str, str]]:
    """(running, from scratch) pairs of receipts and ledgers along one random history."""
    rng = random.Random(seed)
    records = Records(rng)
    running, facts = RunningReceipt(), RunningFacts()
    index = TranscriptIndex()
    entries: list[Entry] = []
    view: list[Entry] = []
    # Microcompaction's cleared ids: a mapping in clearing order that only grows, replaced
    # by a new one when it starts over (the folds flag its items as it grows).
    cleared: dict[str, int] = {}
    for _ in range(160):
        if records.calls and rng.random() < 0.3:
            for tool_id in rng.sample(sorted(set(records.calls)), min(3, len(set(records.calls)))):
                cleared.setdefault(tool_id, 1)
        if rng.random() < 0.03:
            cleared = {tool_id: 1 for tool_id in cleared if rng.random() < 0.5}
        roll = rng.random()
        if roll < 0.05 and view:
            # A compaction: a new view from a boundary and a kept tail.
            boundary = records.boundary()
            tail = view[rng.randint(0, len(view)) :]
            entries = [*entries, boundary]
            view = [boundary, *tail]
        elif roll < 0.08 and view:
            # A rewind: the last records taken out, the lists rebuilt.
            cut = rng.randint(1, min(4, len(view)))
            entries = entries[:-cut] if len(entries) > cut else []
            view = view[:-cut]
        elif roll < 0.1:
            entries = list(entries)  # another list of the same records: the index starts over
        else:
            for _ in range(rng.randint(1, 3)):
                entry = records.entry()
                entries.append(entry)
                view.append(entry)
        if rng.random() < 0.6:
            running.advance(view, index.update(entries), cleared if rng.random() < 0.8 else None)
            facts.advance(view)
        if rng.random() < 0.25:
            kept = _kept(rng, view)
            # The followed mapping mostly; else another collection of the same ids, or
            # another mapping (the flags are then set again).
            roll = rng.random()
            given: Collection[str] = (
                cleared if roll < 0.7 else set(cleared) if roll < 0.85 else dict(cleared)
            )
            index.update(entries)
            receipts = [
                _outcome(partial(_receipt, view, kept, index, ids, fold))
                for fold, ids in ((running, given), (None, frozenset(cleared)))
            ]
            yield receipts[0], receipts[1]
            summarized = list(view) if rng.random() < 0.8 else view[: rng.randint(0, len(view))]
            if summarized and rng.random() < 0.1:
                summarized[rng.randrange(len(summarized))] = records.entry()  # not the view
            yield (
                _outcome(partial(facts.ledger, view, summarized)),
                _outcome(partial(facts_ledger_for, summarized)),
            )
            if facts.facts_of(summarized) is not None:
                yield repr(facts.facts_of(summarized)), repr(extract_facts(summarized))


@pytest.mark.parametrize("seed", range(40))
def test_the_folds_read_what_the_walks_read(seed: int) -> None:
    pairs = list(_drive_folds(seed))
    assert pairs
    for running, scratch in pairs:
        assert running == scratch


def test_the_folds_answer_from_their_sums_where_they_apply() -> None:
    """Not a test that only compares a path with itself: the folds do answer."""
    rng = random.Random(7)
    records = Records(rng)
    view = [records.entry() for _ in range(200)]
    for entry in view:
        if entry.type == "user" and not isinstance(entry.content, (str, list)):
            entry.data["message"]["content"] = "fixed"
        if not entry.uuid:
            entry.data["uuid"] = f"fresh-{id(entry)}"
    seen: set[str] = set()
    for entry in view:
        while entry.uuid in seen:
            entry.data["uuid"] += "x"
        seen.add(str(entry.uuid))
    index = TranscriptIndex().update(view)
    running, facts = RunningReceipt(), RunningFacts()
    running.advance(view, index)
    facts.advance(view)
    assert running.read(view, view[150:], index, set()) is not None
    assert facts.facts_of(list(view)) is not None
    assert facts.facts_of(view[:100]) is None  # not the records folded: read afresh


# -- whole sessions ------------------------------------------------------------------------------

MODEL = "claude-sonnet-4-6"
SESSION_TOOLS = [
    {
        "name": name,
        "description": f"{name} a file or run a command.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
    for name in ("Read", "Bash", "Grep", "Edit", "TodoWrite")
]


class Capturing:
    """A summarizer that keeps every request it is sent and answers a fixed summary."""

    name = "capturing"
    supports_cache_edits = False

    def __init__(self) -> None:
        self.profile = MODEL_PROFILE
        self.requests: list[str] = []

    async def create(
        self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None
    ) -> ModelResponse:
        """The fixed summary; the request kept."""
        self.requests.append(json.dumps(request, ensure_ascii=False))
        text = f"<summary>\n{nine_section_summary('the work')} /repo/src/m3.py\n</summary>"
        return ModelResponse([{"type": "text", "text": text}], "end_turn", {}, MODEL)


class StepClock:
    """Two seconds per reading; now and then a long pause (time-based clearing)."""

    def __init__(self, rng: random.Random) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=timezone.utc)
        self.rng = rng

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=2 if self.rng.random() < 0.99 else 3_700)
        return self.now


def _tool(rng: random.Random, index: int) -> tuple[str, dict[str, Any]]:
    name = rng.choice(("Read", "Bash", "Grep", "Edit", "TodoWrite"))
    path = f"/repo/src/m{rng.randrange(8)}.py"
    if name == "Bash":
        return name, {"command": f"pytest -q tests/test_{rng.randrange(6)}.py"}
    if name == "Edit":
        return name, {"file_path": path, "old_string": f"v{index}", "new_string": "w"}
    if name == "Grep":
        return name, {"pattern": f"step_{index}", "path": "/repo/src"}
    if name == "TodoWrite":
        items = [{"content": f"task {n}", "status": rng.choice(("pending", "completed"))} for n in range(3)]
        return name, {"todos": items}
    return name, {"file_path": path}


WINDOW = 40_000
TURNS = 300
POLICY = Policy(microcompact_min_savings=6_000, microcompact_protect_recent_tokens=12_000)
"""A small window, and clearing in small batches: several compactions, clearing between."""


def _run_session(seed: int, folder: Path) -> tuple[list[str], list[str], str]:
    """One random session: its summary requests, its prepared requests, its transcript."""
    rng = random.Random(seed)
    summarizer = Capturing()
    clock = StepClock(random.Random(seed + 1))
    config = SessionConfig(model=MODEL, system="An agent.", tools=SESSION_TOOLS, context_window=WINDOW)
    policy = POLICY

    def open_session() -> Session:
        return Session.open(folder, config, policy=policy, summarizer=summarizer, clock=clock)

    session = open_session()
    prepared: list[str] = []
    loop = asyncio.new_event_loop()
    try:
        session.add_user("Refactor the modules one by one. Always keep the tests green.")
        for index in range(1, TURNS):
            request = loop.run_until_complete(session.prepare())
            prepared.append(json.dumps(request, ensure_ascii=False))
            # The reply reports the size of the request it answers, as the API would.
            prompt = session.estimate_request_tokens(request["messages"])
            calls = [_tool(rng, index) for _ in range(rng.choice((1, 1, 1, 2)))]
            reply = {
                "id": f"msg_{index:05d}",
                "model": MODEL,
                "stop_reason": "tool_use",
                "content": [
                    {"type": "text", "text": f"Step {index}."},
                    *(
                        {"type": "tool_use", "id": f"toolu_{index}_{n}", "name": name, "input": args}
                        for n, (name, args) in enumerate(calls)
                    ),
                ],
                "usage": {"input_tokens": prompt, "output_tokens": 40},
            }
            session.record(reply)
            if rng.random() < 0.05:
                session.discard_last_reply()  # a regenerate: the same reply again
                session.record(reply)
            results = []
            for n, _ in enumerate(calls):
                result: dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": f"toolu_{index}_{n}",
                    "content": f"def f_{index}():\n    return {n}\n" * rng.randint(20, 100),
                }
                if rng.random() < 0.15:
                    result["is_error"] = True
                results.append(result)
            session.add_tool_results(results)
            if rng.random() < 0.07:
                session.add_user(f"Also document module {rng.randrange(8)}, please.")
            if rng.random() < 0.03:
                session.close()  # saved; resumed from disk
                session = open_session()
        transcript = "\n".join(json.dumps(entry.data, ensure_ascii=False) for entry in session.entries)
    finally:
        loop.close()
        session.close()
    # The folder is named in summaries (where the full transcript is): the same for both runs.
    named = str(folder)
    return (
        [text.replace(named, "<folder>") for text in summarizer.requests],
        [text.replace(named, "<folder>") for text in prepared],
        transcript.replace(named, "<folder>"),
    )


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_NOW = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z")


def _numbered(text: str) -> str:
    """Fresh uuids named by the order they first appear in; times (the wall clock's, which
    two runs cannot share) left out."""
    seen: dict[str, str] = {}
    text = _UUID.sub(lambda m: seen.setdefault(m.group(), f"<uuid-{len(seen)}>"), text)
    return _NOW.sub("<now>", text)


def _old_walks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuse the folds: every compaction reads its records the old way."""
    monkeypatch.setattr(RunningReceipt, "read", lambda *args, **kwargs: None)
    monkeypatch.setattr(RunningFacts, "facts_of", lambda *args, **kwargs: None)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_session_compacts_to_the_same_bytes_with_the_folds(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What is compared is bytes, not durability: the store's fsyncs only cost the test time.
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    folded = _run_session(seed, tmp_path / "folded")
    with monkeypatch.context() as patch:
        _old_walks(patch)
        walked = _run_session(seed, tmp_path / "walked")
    summaries, prepared, transcript = (
        [_numbered(text) for text in part] if isinstance(part, list) else _numbered(part)
        for part in folded
    )
    old_summaries, old_prepared, old_transcript = (
        [_numbered(text) for text in part] if isinstance(part, list) else _numbered(part)
        for part in walked
    )
    assert len(summaries) >= 3  # several compactions
    assert '"alreadyCleared": true' in transcript  # clearing before a compaction
    assert summaries == old_summaries
    assert prepared == old_prepared
    assert transcript == old_transcript


def _turns(session: Session, turns: int) -> None:
    loop = asyncio.new_event_loop()
    try:
        session.add_user("Refactor the modules one by one.")
        for index in range(1, turns):
            loop.run_until_complete(session.prepare())
            name, args = _tool(random.Random(index), index)
            session.record(
                {
                    "id": f"msg_{index}",
                    "model": MODEL,
                    "stop_reason": "tool_use",
                    "content": [{"type": "tool_use", "id": f"t{index}", "name": name, "input": args}],
                    "usage": {"input_tokens": 1_000, "output_tokens": 10},
                }
            )
            session.add_tool_results([{"type": "tool_result", "tool_use_id": f"t{index}", "content": "ok"}])
        loop.run_until_complete(session.prepare())
    finally:
        loop.close()


@pytest.mark.parametrize(
    ("policy", "summarizer", "receipt", "ledger"),
    [
        (Policy(), Capturing(), True, True),
        (Policy(auto_compact_enabled=False), Capturing(), False, False),
        (Policy(), None, True, False),  # the offline summarizer lists the facts itself
        (Policy(facts_ledger=False), Capturing(), True, False),
    ],
)
def test_the_folds_are_kept_only_where_a_compaction_reads_them(
    policy: Policy, summarizer: Capturing | None, receipt: bool, ledger: bool
) -> None:
    """Each call pays for the folds: only where automatic compaction may run, and the
    ledger's only where the summarizer takes a ledger."""
    config = SessionConfig(model=MODEL, system="An agent.", tools=SESSION_TOOLS)
    session = Session(config, policy=policy, summarizer=summarizer)
    try:
        _turns(session, 12)
        view = len(session.view)
        assert session.recall.running_receipt.records == (view if receipt else 0)
        assert session._compactor.facts.records == (view if ledger else 0)
    finally:
        session.close()


def _mentioned_by_definition(text: str, paths: list[str]) -> list[str]:
    """The receipt's rule as written: the path is in the text, or its file name of 4
    characters or more is."""
    out = []
    for path in paths:
        name = path.replace("\\", "/").rsplit("/", 1)[-1]
        if path in text or (len(name) >= 4 and name in text):
            out.append(path)
    return out


@pytest.mark.parametrize("seed", range(30))
def test_the_files_a_summary_mentions_are_those_the_rule_names(seed: int) -> None:
    """Few files or many (the names then looked for in the text's distinct runs), names
    with and without characters outside a run, short names, names across two runs."""
    rng = random.Random(seed)
    alphabet = "ab.-_/\\ é\n1"
    pieces = ["src", "mod.py", "a-b", "x_1.py", "é.txt", "lib", "a b.md", "ab", "b.p", "y"]
    paths = [
        rng.choice(("/", "C:\\", "", "./"))
        + "/".join(rng.choice(pieces) for _ in range(rng.randint(1, 3)))
        + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 3)))
        for _ in range(rng.choice((5, 40, 80)))
    ]
    paths = list(dict.fromkeys(paths))
    text = " ".join(
        rng.choice(paths)[rng.randint(0, 3) :] if rng.random() < 0.3 else rng.choice([*pieces, alphabet])
        for _ in range(60)
    )
    assert _mentioned(text, paths) == _mentioned_by_definition(text, paths)


def _read_call(uuid: str, path: str) -> Entry:
    call = {"type": "tool_use", "id": "call-1", "name": "Read", "input": {"file_path": path}}
    message = {"role": "assistant", "content": [call]}
    return Entry({"type": "assistant", "uuid": uuid, "message": message})


def _result_of_call(uuid: str) -> Entry:
    result = {"type": "tool_result", "tool_use_id": "call-1", "content": "text " * 40}
    return Entry({"type": "user", "uuid": uuid, "message": {"role": "user", "content": [result]}})


def test_an_index_that_starts_over_starts_the_sums_over() -> None:
    """The receipt's items are built from the index: when the index starts over on other
    records (here the call that a result answers, read again with another path), the sums are
    built again from it, even where the view is the same list grown."""
    prompt = Entry({"type": "user", "uuid": "u0", "message": {"role": "user", "content": "go"}})
    result = _result_of_call("u2")
    view = [prompt, _read_call("a1", "/repo/old.py"), result]
    index = TranscriptIndex()
    running = RunningReceipt()
    running.advance(view, index.update(list(view)))
    # Other entries (the call read again with another path): the index starts over on them.
    entries = [prompt, _read_call("a1", "/repo/new.py"), _result_of_call("u2")]
    index.update(entries)
    view.append(Entry({"type": "user", "uuid": "u3", "message": {"role": "user", "content": "ok"}}))
    kept = view[-1:]
    folded = _receipt(view, kept, index, set(), running)
    assert folded == _receipt(view, kept, index, set(), None)
    assert "/repo/new.py" in folded and "/repo/old.py" not in folded


def test_sums_stopped_by_an_odd_record_take_nothing_more() -> None:
    """After a record the sums cannot take, later records are not summed (the cut is read the
    old way)."""
    prompt = Entry({"type": "user", "uuid": "u0", "message": {"role": "user", "content": "go"}})
    text = {"type": "text", "text": Unprintable()}
    odd = Entry({"type": "user", "uuid": "u1", "message": {"role": "user", "content": [text]}})
    view = [prompt]
    index = TranscriptIndex()
    running = RunningReceipt()
    running.advance(view, index.update(view))
    assert running.records == 1
    view.append(odd)
    running.advance(view, index.update(view))  # the sums stop there, without raising
    stopped_at = running.records
    view.extend(_result_of_call(f"r{n}") for n in range(3))
    running.advance(view, index.update(view))
    assert running.records == stopped_at
