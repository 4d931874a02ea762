"""Session memory: template, trigger rule, caps and truncation, edits, updaters, the session glue."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from unbounded.compaction.carried import carried_user_messages
from unbounded.compaction.memory_trigger import UpdateProgress, progress_since, should_update
from unbounded.compaction.memory_updaters import (
    NOTES_TOOL_NAME,
    ModelNotesUpdater,
    OfflineNotesUpdater,
    apply_notes_edits,
    build_update_prompt,
    choose_notes_tool,
)
from unbounded.compaction.notes import (
    SECTION_TITLES,
    SECTIONS,
    missing_sections,
    notes_are_empty,
    parse_notes,
    session_memory_template,
    size_reminders,
    truncate_notes_for_compact,
)
from unbounded.compaction.offline_notes import offline_notes
from unbounded.errors import ConfigError
from unbounded.events import Event, SessionMemoryUpdated, SessionMemoryUpdateFailed
from unbounded.extensions.session_memory import SessionMemory
from unbounded.model.entries import Entry
from unbounded.model.profile import MODEL_PROFILE
from unbounded.model.request import ProviderRequest
from unbounded.policy import Policy
from unbounded.providers.base import ModelResponse, ServerError
from unbounded.session import Session, SessionConfig
from unbounded.storage import FolderStore, MemoryStore

PATH = "/work/s/session-memory/summary.md"
POLICY = Policy(
    session_memory_init_tokens=500,
    session_memory_min_tokens_between_updates=400,
    session_memory_tool_calls_between_updates=3,
)
CONFIG = SessionConfig(
    model="claude-sonnet-4-5",
    system="sys",
    tools=[{"name": "Edit", "input_schema": {"type": "object"}}, {"name": "Bash", "input_schema": {"type": "object"}}],
    context_window=60_000,
)


def progress(tokens: int, calls: int, last_turn: int | None) -> UpdateProgress:
    return UpdateProgress(start=0, pointer_found=True, tokens_since=tokens, tool_calls_since=calls, last_turn_tool_calls=last_turn, last_uuid=None)


def filled(**bodies: str) -> str:
    parsed = parse_notes(session_memory_template())
    for section in parsed.sections:
        if section.title in bodies:
            section.body = bodies[section.title].split("\n")
    return parsed.render()


# -- template and parsing ---------------------------------------------------------------------


def test_template_has_ten_sections_and_round_trips() -> None:
    template = session_memory_template()
    parsed = parse_notes(template)
    assert [s.title for s in parsed.sections] == list(SECTION_TITLES) and len(SECTIONS) == 10
    assert all(s.description and s.description.startswith("_") for s in parsed.sections)
    assert parsed.render() == template
    assert notes_are_empty(template) and notes_are_empty(None) and notes_are_empty("  ")
    assert not notes_are_empty(filled(Worklog="- did a thing"))
    assert missing_sections(template) == []
    assert missing_sections(template.replace("# Worklog", "Worklog")) == ["Worklog"]


# -- the trigger rule -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tokens", "calls", "last_turn", "expected"),
    [
        (399, 10, 0, False),  # not enough new tokens, whatever else
        (400, 3, 2, True),  # enough tokens and enough tool calls
        (400, 2, 2, False),  # enough tokens, too few calls, last turn still calling tools
        (400, 1, 0, True),  # enough tokens, last turn made no tool call
        (400, 0, None, False),  # no response since: not a natural break
    ],
)
def test_trigger_rule(tokens: int, calls: int, last_turn: int | None, expected: bool) -> None:
    assert should_update(progress(tokens, calls, last_turn), POLICY, context_tokens=10_000, initialized=True) is expected


def test_first_update_waits_for_the_init_threshold_and_the_switch() -> None:
    ready = progress(5_000, 5, 1)
    assert not should_update(ready, POLICY, context_tokens=499, initialized=False)
    assert should_update(ready, POLICY, context_tokens=500, initialized=False)
    assert not should_update(ready, POLICY.with_changes(session_memory_enabled=False), context_tokens=9_999, initialized=True)


def test_progress_counts_after_the_covered_message_and_the_last_response() -> None:
    user = Entry.user("please fix the parser " * 50)
    first = Entry.assistant([{"type": "tool_use", "id": "a", "name": "Bash", "input": {"command": "ls"}}], message_id="m1")
    result = Entry.user([{"type": "tool_result", "tool_use_id": "a", "content": "x" * 800}])
    # one response written as two lines (parallel calls) with a result in between
    second_a = Entry.assistant([{"type": "tool_use", "id": "b", "name": "Read", "input": {"file_path": "a"}}], message_id="m2")
    result_b = Entry.user([{"type": "tool_result", "tool_use_id": "b", "content": "y"}])
    second_b = Entry.assistant([{"type": "tool_use", "id": "c", "name": "Read", "input": {"file_path": "b"}}], message_id="m2")
    view = [user, first, result, second_a, result_b, second_b]
    everything = progress_since(view, None)
    assert everything.start == 0 and not everything.pointer_found
    assert everything.tool_calls_since == 3 and everything.last_turn_tool_calls == 2
    after = progress_since(view, result.uuid)
    assert after.start == 3 and after.pointer_found and after.tool_calls_since == 2
    assert after.tokens_since < everything.tokens_since and after.last_uuid == second_b.uuid
    assert progress_since(view, "gone").start == 0  # a pointer not in the view covers nothing


# -- caps, reminders, truncation --------------------------------------------------------------


def test_size_reminders_per_section_and_for_the_file() -> None:
    notes = filled(Worklog="- step\n" * 400)
    reminders = size_reminders(notes, section_cap=100, total_cap=100_000)
    assert len(reminders) == 1 and '"Worklog"' in reminders[0] and "condense" in reminders[0]
    critical = size_reminders(notes, section_cap=100_000, total_cap=200)
    assert len(critical) == 1 and critical[0].startswith("- CRITICAL") and "Worklog" in critical[0]
    prompt = build_update_prompt(notes, notes_path=PATH, policy=Policy(session_memory_section_tokens=100, session_memory_total_tokens=200))
    assert "Over the limits now" in prompt and "CRITICAL" in prompt and PATH in prompt
    assert "Over the limits" not in build_update_prompt(session_memory_template(), notes_path=PATH, policy=Policy())


def test_truncation_keeps_headers_and_points_to_the_file() -> None:
    long_body = "\n".join(f"- line {i} " + "z" * 60 for i in range(400))
    notes = filled(**{"Files and Functions": long_body, "Worklog": "- short"})
    text, cut = truncate_notes_for_compact(notes, max_section_chars=2_000, notes_path=PATH)
    assert cut and PATH in text.splitlines()[-1]
    parsed = parse_notes(text)
    assert [s.title for s in parsed.sections] == list(SECTION_TITLES)
    assert all(s.description for s in parsed.sections)
    files = parsed.get("Files and Functions")
    assert files is not None and len(files.body_text) < 2_100 and files.body[-1].startswith("[…")
    worklog = parsed.get("Worklog")
    assert worklog is not None and worklog.body[0] == "- short"
    short, cut_short = truncate_notes_for_compact(filled(Worklog="- a"), max_section_chars=2_000)
    assert not cut_short and short.rstrip() == filled(Worklog="- a").rstrip()
    with pytest.raises(ConfigError):
        truncate_notes_for_compact(notes, max_section_chars=0)


# -- the one tool ---------------------------------------------------------------------------------


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"t_{name}", "name": name, "input": args}


def test_edits_to_the_notes_are_applied_and_everything_else_refused() -> None:
    notes = filled(Worklog="- first step")
    outcome = apply_notes_edits(
        notes,
        [
            call(NOTES_TOOL_NAME, old_string="- first step", new_string="- first step\n- second step"),
            call("Edit", file_path=PATH, old_string="_One short line per step taken, oldest first._\n", new_string="_One short line per step taken, oldest first._\n"),
            call("Edit", file_path="/etc/passwd", old_string="root", new_string="x"),
            call("Bash", command="rm -rf /"),
            call(NOTES_TOOL_NAME, old_string="not there", new_string="x"),
            call("str_replace_based_edit_tool", command="str_replace", path=PATH, old_str="- second step", new_str="- second step (done)"),
            call("str_replace_based_edit_tool", command="view", path=PATH),
        ],
        notes_path=PATH,
    )
    assert outcome.applied == 3 and len(outcome.refused) == 4
    assert "- second step (done)" in outcome.notes and "/etc/passwd" in outcome.refused[0]
    assert any("'Bash' is not allowed" in reason for reason in outcome.refused)


def test_rewrites_and_header_protection() -> None:
    notes = session_memory_template()
    rewritten = filled(**{"Current State": "- testing"})
    assert apply_notes_edits(notes, [call("Write", file_path=PATH, content=rewritten)], notes_path=PATH).notes == rewritten
    assert apply_notes_edits(notes, [call(NOTES_TOOL_NAME, content=rewritten)], notes_path=PATH).applied == 1
    multi = apply_notes_edits(
        notes,
        [call("MultiEdit", file_path=PATH, edits=[{"old_string": "# Learnings\n", "new_string": "# Learnings\n"}, {"old_string": "# Worklog", "new_string": "# Worklog"}])],
        notes_path=PATH,
    )
    assert multi.applied == 1
    broken = apply_notes_edits(notes, [call(NOTES_TOOL_NAME, content="just some text")], notes_path=PATH)
    assert broken.applied == 0 and broken.notes == notes and "removed section headers" in broken.refused[-1]


def test_choose_the_tool_that_keeps_the_tool_list() -> None:
    assert choose_notes_tool([{"name": "Bash"}, {"name": "Edit"}]) == ("Edit", False)
    assert choose_notes_tool([{"name": "str_replace_based_edit_tool"}]) == ("str_replace_based_edit_tool", False)
    assert choose_notes_tool([{"name": "Bash"}]) == (NOTES_TOOL_NAME, True)
    assert choose_notes_tool(None) == (NOTES_TOOL_NAME, True)


# -- the offline notes ------------------------------------------------------------------------------


def conversation() -> list[Entry]:
    return [
        Entry.user("Fix the date parser in src/dates.py so that ISO weeks work."),
        Entry.assistant([call("Read", file_path="src/dates.py")], message_id="m1"),
        Entry.user([{"type": "tool_result", "tool_use_id": "t_Read", "content": "def parse(): ..."}]),
        Entry.assistant([call("Bash", command="pytest tests/test_dates.py")], message_id="m2"),
        Entry.user([{"type": "tool_result", "tool_use_id": "t_Bash", "content": "ValueError: week 53 out of range", "is_error": True}]),
        Entry.assistant([call("Edit", file_path="src/dates.py", old_string="a", new_string="b")], message_id="m3"),
        Entry.user([{"type": "tool_result", "tool_use_id": "t_Edit", "content": "ok"}]),
        Entry.assistant([{"type": "text", "text": "ISO week 53 now parses; all 14 tests pass."}], message_id="m4"),
    ]


def test_offline_notes_fill_the_sections_from_the_facts() -> None:
    notes = offline_notes(None, conversation(), policy=Policy())
    parsed = parse_notes(notes)
    body = {s.title: s.body_text for s in parsed.sections}
    assert body["Session Title"].startswith("Fix the date parser")
    assert '"Fix the date parser in src/dates.py so that ISO weeks work."' in body["Task Specification"]
    assert "`src/dates.py` (edited)" in body["Files and Functions"] and "`src/dates.py` (read)" in body["Files and Functions"]
    assert "`pytest tests/test_dates.py`" in body["Workflow"]
    assert "[Bash] ValueError: week 53 out of range → next: Edit src/dates.py" in body["Errors & Corrections"]
    assert "all 14 tests pass" in body["Key Results"] and "Last answer given" in body["Current State"]
    assert "`src/`" in body["Codebase and System Documentation"]
    assert body["Worklog"].count("\n") == 0 and "3 tool call(s)" in body["Worklog"]
    # a second update adds, does not duplicate, and appends one worklog line
    more = [Entry.user("Also support week dates like 2020-W53-1."), Entry.assistant([call("Bash", command="pytest tests/test_dates.py")], message_id="m5")]
    again = parse_notes(offline_notes(notes, more, policy=Policy()))
    assert again.get("Task Specification").body_text.count('"') == 4  # type: ignore[union-attr]
    assert again.get("Workflow").body_text.count("pytest") == 1  # type: ignore[union-attr]
    assert again.get("Worklog").body_text.count("\n") == 1  # type: ignore[union-attr]
    assert offline_notes(notes, [], policy=Policy()) == notes


def test_offline_notes_stay_within_the_caps() -> None:
    policy = Policy(session_memory_section_tokens=300, session_memory_total_tokens=1_200)
    notes: str | None = None
    for step in range(60):
        items = [
            Entry.user(f"Request number {step}: change module m{step} " + "carefully " * 10),
            Entry.assistant([call("Bash", command=f"make target{step} " + "-v " * 20)], message_id=f"m{step}"),
        ]
        notes = offline_notes(notes, items, policy=policy)
    assert notes is not None
    sizes = {s.title: len(s.render()) // 4 for s in parse_notes(notes).sections}
    assert max(sizes.values()) <= 300 and len(notes) // 4 <= 1_200
    spec = parse_notes(notes).get("Task Specification")
    assert spec is not None and spec.body[0].startswith('- "Request number 0:')
    assert "condensed away" in spec.body_text and "Request number 59" in spec.body_text


def test_user_messages_of_an_earlier_summary_are_carried() -> None:
    summary = 'Summary:\n6. All user messages:\n   - "Build the exporter"\n   - Keep CSV output\n7. Pending Tasks:\n   - none\nUser messages (1):\n- "Use tabs"'
    assert carried_user_messages(summary) == ["Build the exporter", "Keep CSV output", "Use tabs"]
    entry = Entry.user("This session continues an earlier conversation that ran out of context.\n\n" + summary, is_compact_summary=True)
    notes = offline_notes(None, [entry], policy=Policy())
    assert '"Build the exporter"' in notes and "This session continues" not in notes


# -- updaters and the session ----------------------------------------------------------------------


class NotesModel:
    name = "notes"
    supports_cache_edits = False
    profile = MODEL_PROFILE

    def __init__(self, reply: list[dict[str, Any]] | Exception, delay: float = 0.0) -> None:
        self.reply = reply
        self.delay = delay
        self.requests: list[ProviderRequest] = []

    async def create(self, request: ProviderRequest, *, stream: bool = False, heartbeat: Any = None) -> ModelResponse:
        self.requests.append(request)
        if self.delay:
            await asyncio.sleep(self.delay)
        if isinstance(self.reply, Exception):
            raise self.reply
        return ModelResponse(self.reply, "tool_use", {"input_tokens": 1, "output_tokens": 1}, "m")


def grow(session: Session, turns: int, start: int = 0) -> None:
    for turn in range(start, start + turns):
        session.record(ModelResponse([call("Bash", command=f"make step{turn}") | {"id": f"b{turn}"}], "tool_use", {"input_tokens": 10, "output_tokens": 5}, "m", id=f"msg_{turn}"))
        session.add_tool_results([{"type": "tool_result", "tool_use_id": f"b{turn}", "content": "out\n" * 400}])


def test_model_update_shares_the_cache_and_edits_only_the_notes(tmp_path: Path) -> None:
    notes_path = str(tmp_path / "s" / "session-memory" / "summary.md")
    new = filled(**{"Current State": "- building step 3"})
    model = NotesModel([call("Write", file_path=notes_path, content=new), call("Bash", command="ls")])
    events: list[Event] = []
    memory = SessionMemory(ModelNotesUpdater(model), background=False)
    session = Session.open(tmp_path / "s", CONFIG, policy=POLICY, events=events.append, extensions=[memory])
    session.add_user("Build it.")
    grow(session, 4)
    main = asyncio.run(session.prepare())
    assert len(model.requests) == 1
    fork = model.requests[0]
    assert fork["system"] == main["system"] and fork["tools"] == main["tools"] and fork["model"] == main["model"]
    assert fork["max_tokens"] == main["max_tokens"]
    assert fork["messages"][:-1][:-1] == main["messages"][:-1]  # the same prefix (breakpoints aside)
    assert "cache_control" in str(fork["messages"][-2]) and "cache_control" not in str(fork["messages"][-1])
    assert "SESSION NOTES UPDATE" in str(fork["messages"][-1]) and notes_path in str(fork["messages"][-1])
    assert session.store.read_memory() == new
    assert memory.updated_through == session.view[-1].uuid
    updated = [e for e in events if isinstance(e, SessionMemoryUpdated)]
    assert updated and updated[0].applied == 1 and "'Bash' is not allowed" in updated[0].refused[0]
    # nothing new: no second update
    asyncio.run(session.prepare())
    assert len(model.requests) == 1
    # the pointer survives a restart
    assert isinstance(session.store, FolderStore)
    session.store.close()
    again = SessionMemory()
    Session.open(tmp_path / "s", CONFIG, policy=POLICY, extensions=[again])
    assert again.updated_through == memory.updated_through and again.state.updates == 1


def test_a_session_without_an_editor_gets_the_notes_tool() -> None:
    config = SessionConfig(model="claude-sonnet-4-5", tools=[{"name": "Bash", "input_schema": {"type": "object"}}], context_window=60_000)
    template = session_memory_template()
    model = NotesModel([call(NOTES_TOOL_NAME, old_string="# Worklog\n_One short line per step taken, oldest first._", new_string="# Worklog\n_One short line per step taken, oldest first._\n\n- step")])
    memory = SessionMemory(ModelNotesUpdater(model), background=False)
    session = Session(config, store=MemoryStore(), policy=POLICY, extensions=[memory])
    session.add_user("Go.")
    grow(session, 4)
    asyncio.run(session.prepare())
    assert [t["name"] for t in model.requests[0]["tools"]] == ["Bash", NOTES_TOOL_NAME]  # recall joins at the first clear
    notes = session.store.read_memory()
    assert notes is not None and notes != template and "- step" in notes


def test_refused_failed_and_timed_out_updates_leave_the_pointer(tmp_path: Path) -> None:
    for reply, policy in (
        ([call("Bash", command="ls")], POLICY),
        (ServerError("down", status=500), POLICY),
        ([call("Write", file_path=VIRTUAL, content="x")], POLICY.with_changes(session_memory_update_timeout_seconds=0.01)),
    ):
        events: list[Event] = []
        model = NotesModel(reply, delay=0.2 if policy is not POLICY else 0.0)
        memory = SessionMemory(ModelNotesUpdater(model), background=False)
        session = Session(CONFIG, store=MemoryStore(), policy=policy, events=events.append, extensions=[memory])
        session.add_user("Go.")
        grow(session, 4)
        asyncio.run(session.prepare())
        assert memory.updated_through is None and memory.state.failures == 1
        assert session.store.read_memory() is None
        assert any(isinstance(e, SessionMemoryUpdateFailed) for e in events)


VIRTUAL = "session-memory/summary.md"


def test_background_update_and_the_compaction_wait() -> None:
    async def scenario() -> None:
        model = NotesModel([call("Write", file_path=VIRTUAL, content=filled(Worklog="- one"))], delay=0.3)
        memory = SessionMemory(ModelNotesUpdater(model))
        session = Session(CONFIG, store=MemoryStore(), policy=POLICY.with_changes(session_memory_wait_seconds=0.05), extensions=[memory])
        session.add_user("Go.")
        grow(session, 4)
        task = await memory.maybe_update(session)
        assert task is not None and memory.in_flight
        assert await memory.maybe_update(session) is task  # one at a time
        assert not await memory.wait_for_update(0.05)  # gives up after the wait
        assert await memory.wait_for_update(30)  # ends with the update (~0.25 s): a hang guard
        assert not memory.in_flight and session.store.read_memory() == filled(Worklog="- one")

    asyncio.run(scenario())


def test_a_response_without_tool_calls_starts_an_update() -> None:
    async def scenario() -> None:
        memory = SessionMemory(OfflineNotesUpdater())
        session = Session(CONFIG, store=MemoryStore(), policy=POLICY, extensions=[memory])
        session.add_user("Explain the parser. " * 100)
        session.record(ModelResponse([{"type": "text", "text": "It splits on T."}], "end_turn", {"input_tokens": 900, "output_tokens": 5}, "m"))
        assert memory.in_flight
        assert await memory.wait_for_update(30)  # a hang guard: ends with the update
        assert "Explain the parser" in (session.store.read_memory() or "")

    asyncio.run(scenario())


def test_guarded_query_sources_and_construction_errors() -> None:
    config = SessionConfig(model="claude-sonnet-4-5", context_window=60_000, query_source="session_memory")
    memory = SessionMemory(background=False)
    session = Session(config, store=MemoryStore(), policy=POLICY, extensions=[memory])
    session.add_user("x " * 5_000)
    assert not memory.should_update(session)
    with pytest.raises(ConfigError):
        SessionMemory(object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        Session(CONFIG, store=MemoryStore(), policy=POLICY, extensions=[memory])
    with pytest.raises(ConfigError):
        ModelNotesUpdater(object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        Policy(session_memory_keep_min_tokens=50_000, session_memory_keep_max_tokens=40_000)
    with pytest.raises(ConfigError):
        Policy(session_memory_section_tokens=20_000, session_memory_total_tokens=12_000)
    assert Policy.from_env({"UNBOUNDED_DISABLE_SESSION_MEMORY": "1"}).session_memory_enabled is False


def test_offline_notes_keep_the_rules_and_the_latest_request_through_updates_and_condensing() -> None:
    policy = Policy(session_memory_section_tokens=300, session_memory_total_tokens=4_000)
    first = [Entry.user("Port the exporter. Never push to main, open a pull request.\nStart with CSV.")]
    notes = offline_notes(None, first, policy=policy)
    state = parse_notes(notes).get("Current State")
    assert state is not None and state.body[:2] == [
        "Standing instructions from the user (verbatim):",
        '- "Never push to main, open a pull request."',
    ]
    assert "> Port the exporter. Never push to main, open a pull request.\n> Start with CSV." in state.body_text
    # many updates without a request: both stay, verbatim and first, while the rest is condensed
    for step in range(40):
        items = [
            Entry.assistant([call("Bash", command=f"make target{step} " + "-v " * 30) | {"id": f"b{step}"}], message_id=f"m{step}"),
            Entry.user([{"type": "tool_result", "tool_use_id": f"b{step}", "content": f"error: step {step} failed " * 5, "is_error": True}]),
        ]
        notes = offline_notes(notes, items, policy=policy)
    state = parse_notes(notes).get("Current State")
    assert state is not None and state.body[0] == "Standing instructions from the user (verbatim):"
    assert "> Start with CSV." in state.body_text
    # a new request replaces the latest one and adds its rule
    notes = offline_notes(notes, [Entry.user("Now the JSON export. Always run make lint first.")], policy=policy)
    state = parse_notes(notes).get("Current State")
    assert state is not None and "> Now the JSON export." in state.body_text and "> Start with CSV." not in state.body_text
    assert '- "Never push to main, open a pull request."\n- "Now the JSON export."' not in state.body_text
    assert '- "Always run make lint first."' in state.body_text and '- "Never push to main, open a pull request."' in state.body_text
    assert "Names in the recent work" not in notes and "Other paths seen recently" not in notes


def test_offline_notes_state_the_git_checks_tracker_and_plan() -> None:
    items = [
        Entry.user("Ship the fix."),
        Entry.assistant([call("Bash", command="bd update fx-1 --status in_progress") | {"id": "t1"}], message_id="a1"),
        Entry.user([{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]),
        Entry.assistant([call("Bash", command="bd ready") | {"id": "r0"}], message_id="r0"),
        Entry.user([{"type": "tool_result", "tool_use_id": "r0", "content": "1. [● P1] [task] fx-1: This one\n2. [● P2] [task] fx-2: The next one"}]),
        Entry.assistant([call("Bash", command="bd close fx-0") | {"id": "t0"}], message_id="a0"),
        Entry.user([{"type": "tool_result", "tool_use_id": "t0", "content": "ok"}]),
        Entry.assistant([call("Bash", command="git commit -m fix") | {"id": "g1"}], message_id="a2"),
        Entry.user([{"type": "tool_result", "tool_use_id": "g1", "content": "[main 1234567] fix"}]),
        Entry.assistant([{"type": "text", "text": "Next:\n1. update parser.py\n2. done"}, call("Edit", file_path="/r/a.py", old_string="a", new_string="b") | {"id": "e1"}], message_id="a3"),
        Entry.user([{"type": "tool_result", "tool_use_id": "e1", "content": "ok"}]),
        Entry.assistant([call("Bash", command="pytest -q") | {"id": "p1"}], message_id="a4"),
        Entry.user([{"type": "tool_result", "tool_use_id": "p1", "content": "1 failed"}]),
    ]
    state = parse_notes(offline_notes(None, items, policy=Policy())).get("Current State")
    assert state is not None
    body = state.body_text
    assert "- In progress in the tracker: fx-1" in body and "- Tracker: fx-0 is closed" in body
    assert '- Last commit: 1234567 "fix"' in body and "- Changed after it: /r/a.py" in body
    assert "- Last `pytest` failed" in body
    assert "- Planned, no file change yet: update parser.py" in body
    assert "- Next ready in the tracker: fx-2 — The next one" in body
    assert "Still open in" not in body


def test_offline_notes_keep_what_the_last_status_file_read_lists_as_open() -> None:
    def read(path: str, text: str, n: int) -> list[Entry]:
        return [
            Entry.assistant([call("Read", file_path=path) | {"id": f"r{n}"}], message_id=f"m{n}"),
            Entry.user([{"type": "tool_result", "tool_use_id": f"r{n}", "content": text}]),
        ]

    items = [Entry.user("Go on."), *read("/p/TODO.md", "- [ ] old item", 1), *read("/p/STATUS.md", "- [x] done\n- [ ] Phase 3: BMAD\nNext: release", 2)]
    state = parse_notes(offline_notes(None, items, policy=Policy())).get("Current State")
    assert state is not None
    assert "- Still open in /p/STATUS.md: [ ] Phase 3: BMAD; Next: release" in state.body_text
    assert "old item" not in state.body_text
