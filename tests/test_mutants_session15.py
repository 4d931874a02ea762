"""Rules of session 15 that the mutation check found held by no test (batch totals, codex
reading, policy files, record checks): each test fails when its rule is flipped or dropped."""

from __future__ import annotations

import json
import logging
import math
import os
import time
from array import array
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

import pytest

from unbounded import storage
from unbounded.cli.batch import _run_in_pools, run_each
from unbounded.cli.batch_totals import (
    BilledShares,
    billed_shares,
    find_repeats,
    first_record_time,
)
from unbounded.errors import ConfigError, SessionLockedError, TranscriptError
from unbounded.evaluation.call_series import CallPoint, CallSeries
from unbounded.model.entries import Entry
from unbounded.policy import Policy
from unbounded.storage import FolderStore
from unbounded.transcripts.codex import detect_ordering, read_codex

if TYPE_CHECKING:
    from unbounded.evaluation.replay import ReplayReport
    from unbounded.evaluation.replay_recording import ReplayRecording


# -- cli/batch_totals.py -----------------------------------------------------------------------


def _shares(
    first_time: float | None,
    ids: list[int],
    recorded: list[float],
    last_time: float | None = None,
) -> BilledShares:
    return BilledShares(
        first_time=first_time,
        last_time=last_time,
        ids=array("Q", ids),
        cost=array("d", [1.0] * len(ids)),
        recorded=array("d", recorded),
        replayed=bytes([1]) * len(ids),
        compactions=array("H", [0] * len(ids)),
    )


def test_the_first_time_is_read_from_the_first_64_records_only(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    head = [json.dumps({"type": "summary", "n": n}) for n in range(64)]
    stamped = json.dumps({"type": "user", "timestamp": "2026-03-02T09:00:00.000Z"})
    path.write_text("\n".join([*head[:63], stamped]) + "\n", encoding="utf-8")
    assert first_record_time(path) is not None  # the 64th record is read
    path.write_text("\n".join([*head, stamped]) + "\n", encoding="utf-8")
    assert first_record_time(path) is None  # the 65th is not


def test_a_repeated_call_without_a_recorded_cost_makes_the_recorded_total_unpriced() -> None:
    first = _shares(1.0, [7, 8], [0.5, 0.25])
    copy = _shares(2.0, [7, 8], [math.nan, 0.25])
    found = find_repeats([("a", first), ("b", copy)])
    assert found[0] is None
    repeats = found[1]
    assert repeats is not None
    assert (repeats.calls, repeats.recorded_priced, repeats.recorded_cost) == (2, False, 0.25)
    priced = find_repeats([("a", first), ("b", _shares(2.0, [7, 8], [0.5, 0.25]))])[1]
    assert priced is not None
    assert (priced.recorded_priced, priced.recorded_cost) == (True, 0.75)


def test_a_file_with_a_first_time_comes_before_one_without() -> None:
    # "a" sorts first by name, but has no time: the call is "b"'s, and "a" repeats it.
    found = find_repeats([("a", _shares(None, [7], [0.5])), ("b", _shares(5.0, [7], [0.5]))])
    assert found[1] is None
    assert found[0] is not None
    assert found[0].of == ("b",)


def test_on_a_first_time_tie_the_file_whose_last_call_came_first_owns_the_call() -> None:
    # A resume's copy keeps the copied records' times: "a" (the copy, named first) ties "b"
    # on the first record, and its own later turns make its last call the later one.
    copy, original = _shares(5.0, [7], [0.5], last_time=90.0), _shares(5.0, [7], [0.5], 20.0)
    found = find_repeats([("a", copy), ("b", original)])
    assert found[1] is None
    assert found[0] is not None and found[0].of == ("b",)
    # A file without a last time comes after one with it.
    found = find_repeats([("a", _shares(5.0, [7], [0.5])), ("b", original)])
    assert found[0] is not None and found[0].of == ("b",)


def _point(index: int, cost: float, recorded: float | None) -> CallPoint:
    return CallPoint(
        index=index,
        time=0.0,
        context_tokens=10,
        cache_read=0,
        cache_write=0,
        uncached_input=10,
        output_tokens=1,
        cost=cost,
        recorded_context_tokens=None,
        recorded_cost=recorded,
        baseline_context_tokens={},
        baseline_cost={},
    )


def test_billed_shares_reads_points_given_as_a_plain_list_as_a_call_series(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"timestamp": "2026-03-02T09:00:00Z"}) + "\n", encoding="utf-8")
    points = [_point(0, 0.5, None), _point(1, 0.25, 0.125)]
    series = CallSeries()
    for point in points:
        series.append(point)
    recording = cast(
        "ReplayRecording",
        SimpleNamespace(script=SimpleNamespace(message_ids=["m1", "m2"], request_times=[1.0, 2.0])),
    )
    made: list[BilledShares] = []
    for given in (points, series):
        report = cast(
            "ReplayReport",
            SimpleNamespace(
                points=given,
                not_replayed_costs=[("m3", 0.0, 1.0)],
                compaction_records=[SimpleNamespace(call=1), SimpleNamespace(call=1)],
            ),
        )
        made.append(billed_shares(path, recording, report))
    listed, columns = made
    assert listed.cost.tolist() == columns.cost.tolist() == [0.5, 0.25, 0.0]
    assert str(listed.recorded.tolist()) == str(columns.recorded.tolist()) == "[nan, 0.125, 1.0]"
    assert listed.replayed == columns.replayed == b"\x01\x01\x00"
    assert listed.ids == columns.ids
    assert listed.compactions.tolist() == [0, 2, 0]  # two compactions at the second call


# -- policy.py: field types, lists as tuples, lines named in a policy file's errors ---------------


def test_an_optional_field_is_still_checked_when_set() -> None:
    with pytest.raises(ConfigError, match=r"max_output_override must be a whole number or None"):
        Policy(max_output_override="12")  # type: ignore[arg-type]


def test_a_required_field_is_not_said_to_take_none() -> None:
    with pytest.raises(ConfigError) as refused:
        Policy(recall_max_tokens=None)  # type: ignore[arg-type]
    assert str(refused.value) == "Policy.recall_max_tokens must be a whole number, not None"


def test_true_is_not_a_whole_number_for_a_count() -> None:
    with pytest.raises(ConfigError, match="recall_max_tokens must be a whole number, not True"):
        Policy(recall_max_tokens=True)


def test_a_list_field_checks_each_item_and_names_what_it_holds() -> None:
    with pytest.raises(ConfigError) as text:
        Policy(compaction_tier_order=(1, 2))  # type: ignore[arg-type]
    assert str(text.value) == "Policy.compaction_tier_order must be a list of text, not (1, 2)"
    with pytest.raises(ConfigError) as numbers:
        Policy(budget_reminder_marks=["half"])  # type: ignore[arg-type]
    assert (
        str(numbers.value)
        == "Policy.budget_reminder_marks must be a list of numbers, not ('half',)"
    )


def test_a_list_given_to_a_field_that_is_no_list_is_named_as_given() -> None:
    with pytest.raises(ConfigError) as refused:
        Policy(max_output_override=[1, 2])  # type: ignore[arg-type]
    assert str(refused.value).endswith("not [1, 2]")


def _policy_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_text_where_a_policy_file_wants_a_list_is_refused_as_written(tmp_path: Path) -> None:
    path = _policy_file(tmp_path, '[policy]\ncompaction_tier_order = "native"\n')
    with pytest.raises(ConfigError, match="must be a list of text, not 'native'"):
        Policy.from_file(path, base=Policy())


def test_a_whole_number_in_a_policy_file_for_a_fraction_is_kept_as_a_float(tmp_path: Path) -> None:
    path = _policy_file(tmp_path, "[policy]\nearly_compact_fraction = 1\n")
    policy = Policy.from_file(path, base=Policy())
    assert type(policy.early_compact_fraction) is float
    assert "early_compact_fraction = 1.0\n" in policy.to_toml()


def test_a_policy_file_error_names_the_line_of_its_field(tmp_path: Path) -> None:
    path = _policy_file(tmp_path, "[policy]\nearly_compact_fraction = 0.5\nptl_max_retries = 0\n")
    with pytest.raises(ConfigError) as refused:
        Policy.from_file(path, base=Policy())
    assert str(refused.value).startswith(f"{path}:3: Policy.ptl_max_retries")


# -- transcripts/codex.py: the session_meta record ----------------------------------------------


def _rollout_line(second: int, kind: str, payload: dict[str, Any]) -> str:
    return json.dumps(
        {"timestamp": f"2025-10-01T08:00:{second:02d}.000Z", "type": kind, "payload": payload}
    )


def test_a_rollouts_session_meta_names_the_session_and_its_instructions(tmp_path: Path) -> None:
    # Read in the test's own body (a module fixture's reading is charged by the mutation
    # check to the first test using it, which may not look at the session).
    meta = {"id": "s-9", "cwd": "/w", "base_instructions": {"text": "Be brief."}}
    said = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "hi"}],
    }
    asked = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}
    path = tmp_path / "rollout.jsonl"
    lines = [
        _rollout_line(0, "session_meta", meta),
        _rollout_line(1, "response_item", asked),
        _rollout_line(2, "response_item", said),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    transcript = read_codex(path)
    assert transcript.meta["system"] == "Be brief."
    assert transcript.meta["session_metas"] == 1
    assert {entry.data.get("sessionId") for entry in transcript.entries} == {"s-9"}


def test_a_policy_file_refuses_an_unknown_field_and_a_policy_that_is_no_table(
    tmp_path: Path,
) -> None:
    unknown = _policy_file(tmp_path, "[policy]\nearly_compact_fractoin = 0.5\n")
    with pytest.raises(ConfigError, match="unknown policy field 'early_compact_fractoin'"):
        Policy.from_file(unknown, base=Policy())
    scalar = _policy_file(tmp_path, "policy = 5\n")
    with pytest.raises(ConfigError, match=r"\[policy\] must be a table of field = value"):
        Policy.from_file(scalar, base=Policy())


def test_a_policy_file_names_the_line_of_a_text_given_for_a_count(tmp_path: Path) -> None:
    path = _policy_file(tmp_path, '[policy]\nrecall_max_tokens = "5000"\n')
    with pytest.raises(ConfigError) as refused:
        Policy.from_file(path, base=Policy())
    assert str(refused.value).startswith(
        f"{path}:2: policy field 'recall_max_tokens' has the wrong type: '5000'"
    )


# -- storage.py: a folder held in this process ---------------------------------------------------


class _Clock:
    """A monotonic clock that moves only when slept on."""

    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_folder_open_in_this_process_is_refused_as_such_after_the_whole_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(storage, "_HELD_HERE", set())  # this test's entries only
    clock = _Clock()
    monkeypatch.setattr(
        storage, "time", SimpleNamespace(monotonic=clock.monotonic, sleep=clock.sleep)
    )
    with FolderStore(tmp_path / "s"), pytest.raises(SessionLockedError) as refused:
        FolderStore(tmp_path / "s", wait=5)
    assert clock.now >= 105.0  # the whole wait asked for, not a second less
    message = str(refused.value)
    assert "is already open in this process after waiting 5 s" in message
    assert "another process" not in message


# -- model/entries.py: Entry.message_id's fallback ------------------------------------------------

_USAGE = {"input_tokens": 3, "output_tokens": 1}


def test_only_an_assistant_record_has_a_response_id() -> None:
    user = {"type": "user", "message": {"role": "user", "id": "msg_1", "content": "hi"}}
    assert Entry(user, 4).message_id is None


def test_an_empty_request_id_or_uuid_does_not_name_a_response() -> None:
    message = {"role": "assistant", "content": [], "usage": _USAGE}
    base = {"type": "assistant", "message": message}
    assert Entry({**base, "requestId": "", "uuid": "u1"}, 4).message_id == "line:u1"
    assert Entry({**base, "requestId": 7, "uuid": "u1"}, 4).message_id == "line:u1"
    assert Entry({**base, "requestId": None, "uuid": ""}, 4).message_id == "line:4"
    assert Entry({**base, "uuid": 9}, 4).message_id == "line:4"


# -- cli/batch.py: run_each and _guarded ----------------------------------------------------------


def _missing(path: str) -> str:
    raise FileNotFoundError(2, "No such file or directory", f"{path}.jsonl")


def _plain_os_error(path: str) -> str:
    raise OSError("disk on fire")


def _crashes_on_b(path: str) -> str:
    if path == "b":
        raise ZeroDivisionError("made to crash")
    return path.upper()


def _pid(path: str) -> int:
    return os.getpid()


class _ExitsWhenUnpickled:
    """A work function whose unpickling ends the worker process: it dies before starting any
    session, so the pool cannot tell which session killed it."""

    def __call__(self, path: str) -> str:
        return path

    def __reduce__(self) -> tuple[Any, tuple[int]]:
        return (os._exit, (3,))


def test_an_os_error_names_its_file_and_says_what_failed() -> None:
    (missing,) = run_each(_missing, ["a"], jobs=1)
    assert missing.error == "a.jsonl: No such file or directory"
    (plain,) = run_each(_plain_os_error, ["a"], jobs=1)
    assert plain.error == "disk on fire"


def test_a_bug_on_one_session_of_two_is_contained_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR, logger="unbounded.cli.batch"):
        outcomes = list(run_each(_crashes_on_b, ["a", "b"], jobs=1))
    assert [o.result for o in outcomes] == ["A", None]
    assert outcomes[1].error is not None
    assert outcomes[1].error.startswith("b: unexpected ZeroDivisionError: made to crash")
    assert [r.message.splitlines()[0] for r in caplog.records] == [
        "b failed with an unexpected exception:"
    ]
    assert "Traceback" in caplog.text


def test_a_bug_on_a_single_session_is_raised_as_it_is() -> None:
    with pytest.raises(ZeroDivisionError, match="made to crash"):
        list(run_each(_crashes_on_b, ["b"], jobs=1))


def test_one_job_runs_in_this_process_and_two_in_workers() -> None:
    seen: list[str] = []

    def here(path: str) -> str:  # a closure: it cannot be sent to a worker process
        seen.append(path)
        return path

    assert [o.result for o in run_each(here, ["a", "b", "c"], jobs=1)] == ["a", "b", "c"]
    assert seen == ["a", "b", "c"]
    pids = [o.result for o in run_each(_pid, ["a", "b"], jobs=2)]
    assert os.getpid() not in pids


def test_workers_dying_before_any_session_starts_fail_each_session_alone() -> None:
    outcomes = list(run_each(_ExitsWhenUnpickled(), ["a", "b"], jobs=2))
    assert [o.error for o in outcomes] == [
        f"{path}: the worker process running it died: out of memory? run it alone "
        "(without --jobs) to see why"
        for path in ("a", "b")
    ]


def _a_slow_b_dies(path: str) -> str:
    if path == "b":
        os._exit(3)
    time.sleep(1)  # a is still running when b's worker dies: both are run again alone
    return path.upper()


def test_each_session_of_a_broken_pool_is_given_once() -> None:
    given = list(_run_in_pools(_a_slow_b_dies, ["a", "b"], 2, True))
    assert sorted(index for index, _ in given) == [0, 1]
    assert dict(given)[0].result == "A"


# -- transcripts/codex.py: older lines the mutation check reached only through a module fixture --


def _usage_event(last: int, total: int) -> dict[str, Any]:
    info = {
        "total_token_usage": {"input_tokens": total, "output_tokens": 1},
        "last_token_usage": {"input_tokens": last, "output_tokens": 1},
    }
    return {"type": "token_count", "info": info}


def _write_rollout(path: Path, records: list[tuple[str, dict[str, Any]]], stamped: bool) -> Path:
    lines = []
    for second, (kind, payload) in enumerate(records):
        record: dict[str, Any] = {"type": kind, "payload": payload}
        if stamped:
            record["timestamp"] = f"2025-10-01T08:00:{second:02d}.000Z"
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


_ASKED = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}
_SAID = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}
_CALLED = {
    "type": "function_call",
    "name": "shell",
    "arguments": '{"command": ["ls"]}',
    "call_id": "c1",
}
_ANSWERED = {"type": "function_call_output", "call_id": "c1", "output": "a.py"}


def test_a_rollout_without_session_meta_reads_its_responses(tmp_path: Path) -> None:
    records: list[tuple[str, dict[str, Any]]] = [
        ("turn_context", {"model": "gpt-5-codex"}),
        ("turn_context", {"model": ""}),  # an empty model name changes nothing
        ("zzz_record", {"n": 1}),
        ("response_item", _ASKED),
        ("response_item", _CALLED),
        ("event_msg", _usage_event(10, 10)),
        ("response_item", _ANSWERED),
        ("response_item", _SAID),
        ("event_msg", _usage_event(20, 30)),
    ]
    transcript = read_codex(_write_rollout(tmp_path / "r.jsonl", records, stamped=True))
    replies = [e for e in transcript.entries if e.type == "assistant"]
    assert [e.message_id for e in replies] == ["codex_msg_1", "codex_msg_2"]
    assert [(e.message or {}).get("stop_reason") for e in replies] == ["tool_use", "end_turn"]
    assert {e.model for e in replies} == {"gpt-5-codex"}
    assert transcript.meta["turn_contexts"] == 2
    assert transcript.meta["system"] is None
    assert transcript.unknown_record_types == {"zzz_record": 1}


def test_a_rollout_without_timestamps_gets_times_from_the_epoch(tmp_path: Path) -> None:
    records = [
        ("response_item", _ASKED),
        ("response_item", _SAID),
        ("event_msg", _usage_event(5, 5)),
    ]
    transcript = read_codex(_write_rollout(tmp_path / "r.jsonl", records, stamped=False))
    stamps = [e.data.get("timestamp") for e in transcript.entries]
    assert stamps and all(isinstance(s, str) and s.startswith("1970-01-01") for s in stamps)


def test_an_empty_rollout_is_refused_at_line_1(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("", encoding="utf-8")
    with pytest.raises(TranscriptError) as refused:
        read_codex(path)
    assert refused.value.line == 1


def test_the_usage_order_is_read_only_after_a_usage_event(tmp_path: Path) -> None:
    # A user message before any usage decides nothing, even one whose text is "token_count"
    # (such a line is parsed); the reply after the usage event says "leading".
    text: list[dict[str, Any]] = [{"type": "input_text", "text": "token_count"}]
    asked: dict[str, Any] = {"type": "message", "role": "user", "content": text}
    records = [
        ("response_item", asked),
        ("event_msg", _usage_event(5, 5)),
        ("response_item", _SAID),
    ]
    assert detect_ordering(_write_rollout(tmp_path / "r.jsonl", records, stamped=True)) == "leading"
