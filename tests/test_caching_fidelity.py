"""Fidelity: the simulator, laid out as Claude Code sends its requests, reproduces the recorded
cache-read share of real sessions within 2 percentage points."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from recorded_calls import recorded_time as _time
from recorded_calls import recorded_usage as _usage
from recorded_calls import tool_call_session

from conftest import FIXTURES, corpus_files
from unbounded import load_transcript
from unbounded.caching.fidelity import (
    FidelityReport,
    RecordedUsage,
    prefix_change_events,
    simulate_recorded_session,
)
from unbounded.catalog import load_model_table
from unbounded.errors import ConfigError
from unbounded.model.entries import Entry, create_compact_boundary
from unbounded.model.transcript import Transcript
from unbounded.tokens.exact import TiktokenCounter

CLAUDE = corpus_files("*.jsonl")
SHARE_TOLERANCE = {"anthropic": 0.02, "openai": 0.04}
"""How far the simulated cache-read share may be from the recorded one, per provider.

Anthropic's cache is deterministic given the markers and the TTL, so 2 points. OpenAI's is
best-effort: in the corpus Codex rollout the API missed a warm prefix a few seconds after it
was written (calls 2, 5, 111, 219…) and read one after gaps of up to 13.6 minutes, past the
5-minute retention the simulator assumes (OpenAI documents 5 to 10 minutes, up to an hour
off-peak). Neither is predictable from a transcript: the simulator's share is 3.4 points under
the recorded one there (2.1 over with a 10-minute retention), hence 4 points."""


@pytest.mark.corpus
@pytest.mark.parametrize("path", CLAUDE or [None], ids=lambda p: p.name if p else "absent")
def test_corpus_session_share_within_two_points(path: Path | None) -> None:
    if path is None:
        pytest.skip("../shared/corpus/raw is not present")
    transcript = load_transcript(path)
    if transcript.format not in ("claude-code", "codex") or len(transcript.api_calls()) < 2:
        pytest.skip("no recorded cache usage (format) or fewer than two recorded calls")
    report = simulate_recorded_session(transcript)
    tolerance = SHARE_TOLERANCE[load_model_table().get(report.model).provider]
    assert abs(report.simulated_cache_read_share - report.recorded_cache_read_share) <= tolerance, (
        report.to_dict()
    )
    assert len(report.calls) == len(transcript.api_calls())


@pytest.mark.corpus
def test_corpus_with_exact_counter(corpus: Path) -> None:
    path = corpus / "marot-spotter_8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
    if not path.exists():
        pytest.skip("session not in the corpus")
    report = simulate_recorded_session(load_transcript(path), counter=TiktokenCounter())
    assert report.counter == "text:o200k_base"
    assert abs(report.share_error) <= 0.02
    assert report.compactions == 1


# -- synthetic sessions ---------------------------------------------------------------------


def _session(
    calls: list[tuple[float, int, int]], *, ttl: str = "5m", ttls: list[str] | None = None
) -> Transcript:
    """A prompt, then per call a user note (sent 1 s before), a tool call and its result:
    (seconds, recorded read, recorded creation), written with `ttl` or each call's `ttls`."""
    return tool_call_session(calls, ttl=ttl, ttls=ttls)


def test_a_gap_longer_than_the_ttl_is_a_miss() -> None:
    transcript = _session(
        [(0, 0, 20_000), (30, 20_000, 1_000), (700, 0, 22_000), (710, 22_000, 1_000)]
    )
    report = simulate_recorded_session(transcript)
    reads = [call.simulated.cache_read_input_tokens for call in report.calls]
    assert reads[0] == 0 and reads[1] > 0 and reads[2] == 0 and reads[3] > 0
    assert [call.ttl for call in report.calls] == ["5m"] * 4


def test_one_hour_sessions_survive_the_gap() -> None:
    transcript = _session([(0, 0, 20_000), (30, 20_000, 1_000), (700, 21_000, 1_000)], ttl="1h")
    report = simulate_recorded_session(transcript)
    assert report.calls[2].simulated.cache_read_input_tokens > 0
    assert report.calls[2].simulated.cache_creation_1h_input_tokens > 0
    assert report.calls[2].ttl == "1h"


def test_warm_start_and_calibration() -> None:
    transcript = _session([(0, 15_000, 6_000), (10, 21_000, 1_000), (20, 22_000, 1_000)])
    report = simulate_recorded_session(transcript)
    assert report.warm_prefix_tokens == 15_000
    assert report.calls[0].simulated.cache_read_input_tokens == 15_000
    # The recorded prompts grow ~1,000 tokens a call; the estimate of a 4,000-char result is
    # ~1,000 too, so the calibration stays near 1.
    assert 0.8 <= report.scale <= 1.3
    assert abs(report.share_error) < 0.02
    uncalibrated = simulate_recorded_session(transcript, calibrate=False)
    assert uncalibrated.scale == 1.0


GROWING = [(0, 0, 20_000), (10, 20_000, 1_000), (20, 21_000, 1_000), (30, 22_000, 3_000), (40, 25_000, 3_000)]
"""Recorded prompts growing 1,000 tokens a call, then 3,000 (the estimate grows ~1,000)."""


def test_held_out_fits_on_the_first_calls_and_judges_the_rest() -> None:
    transcript = _session(GROWING)
    in_sample = simulate_recorded_session(transcript)
    held_out = simulate_recorded_session(transcript, fit_calls=3)
    assert in_sample.judged_from == 0 and held_out.judged_from == 3
    # The scale is the one the first three calls alone give, not the whole session's.
    assert held_out.scale == simulate_recorded_session(_session(GROWING[:3])).scale
    assert held_out.scale < in_sample.scale
    # Shares and costs over calls 3 and 4 only.
    judged = held_out.calls[3:]
    recorded = sum(c.recorded.cache_read_input_tokens for c in judged) / sum(
        c.recorded.prompt_tokens for c in judged
    )
    assert held_out.recorded_cache_read_share == pytest.approx(recorded)
    assert held_out.simulated_cost_usd == pytest.approx(sum(c.simulated.cost_usd for c in judged))
    assert held_out.to_dict()["judged_from"] == 3 and len(held_out.calls) == len(GROWING)


def test_held_out_calls_keep_the_last_fitted_ttl() -> None:
    transcript = _session(GROWING, ttls=["5m", "5m", "5m", "1h", "1h"])
    assert [c.ttl for c in simulate_recorded_session(transcript).calls][3:] == ["1h", "1h"]
    held_out = simulate_recorded_session(transcript, fit_calls=3)
    assert [c.ttl for c in held_out.calls] == ["5m"] * 5
    assert held_out.calls[4].recorded.cache_creation_1h_input_tokens == 3_000  # as recorded


@pytest.mark.parametrize("fit_calls", [0, -1, 5, 6])
def test_held_out_needs_calls_on_both_sides(fit_calls: int) -> None:
    with pytest.raises(ConfigError, match=r"fit_calls=-?\d+ for a session of 5 recorded calls: fit on 1 to 4"):
        simulate_recorded_session(_session(GROWING), fit_calls=fit_calls)


def test_compaction_misses_the_messages_and_reads_the_prefix() -> None:
    transcript = _session([(0, 0, 20_000), (10, 20_000, 1_000)])
    boundary = create_compact_boundary("auto", 21_000, timestamp=_time(20))
    summary = Entry.user("Summary: " + "s" * 2000, timestamp=_time(21), is_compact_summary=True)
    after = Entry.assistant(
        [{"type": "text", "text": "Continuing."}],
        message_id="msg_after",
        model="claude-sonnet-4-5",
        usage=_usage(18_000, 600),
        timestamp=_time(30),
    )
    transcript.entries.extend([boundary, summary, after])
    report = simulate_recorded_session(transcript)
    last = report.calls[-1]
    assert last.after_compaction
    assert report.compactions == 1
    assert last.simulated.cache_read_input_tokens == report.prefix_tokens
    assert last.simulated.cache_creation_input_tokens > 0


def test_mcp_reconnection_changes_the_prefix() -> None:
    transcript = _session([(0, 10_000, 12_000), (10, 22_000, 1_000)])
    transcript.entries.extend(
        [
            Entry.user("<command-name>/mcp</command-name>", timestamp=_time(20)),
            Entry.user(
                "<local-command-stdout>Reconnected to tidewave.</local-command-stdout>",
                timestamp=_time(20),
            ),
            Entry.user("next", timestamp=_time(21)),
            Entry.assistant(
                [{"type": "text", "text": "ok"}],
                message_id="msg_x",
                model="claude-sonnet-4-5",
                usage=_usage(10_000, 14_000),
                timestamp=_time(30),
            ),
        ]
    )
    report = simulate_recorded_session(transcript)
    assert report.calls[-1].prefix_changed
    assert report.prefix_changes == ("call 2: mcp servers changed (/mcp)",)
    assert report.calls[-1].simulated.cache_read_input_tokens == report.warm_prefix_tokens
    dismissed = [
        Entry.user("<command-name>/mcp</command-name>"),
        Entry.user("<local-command-stdout>MCP dialog dismissed</local-command-stdout>"),
    ]
    assert prefix_change_events(dismissed) == []


def test_model_change_is_a_prefix_change() -> None:
    transcript = _session([(0, 0, 20_000), (10, 20_000, 1_000)])
    transcript.entries.append(
        Entry.assistant(
            [{"type": "text", "text": "ok"}],
            message_id="msg_opus",
            model="claude-opus-4-6",
            usage=_usage(0, 22_000),
            timestamp=_time(30),
        )
    )
    report = simulate_recorded_session(transcript, load_model_table().get("claude-sonnet-4-5"))
    assert report.calls[-1].prefix_changed
    assert report.calls[-1].simulated.cache_read_input_tokens == 0


def test_recorded_usage_without_split() -> None:
    usage = {"input_tokens": 1, "cache_creation_input_tokens": 500, "cache_read_input_tokens": 9}
    assert RecordedUsage.from_usage(usage, "1h").cache_creation_1h_input_tokens == 500
    assert RecordedUsage.from_usage(usage, "5m").cache_creation_5m_input_tokens == 500
    assert RecordedUsage.from_usage(usage, "5m").prompt_tokens == 510


def test_fixture_report_is_json_ready() -> None:
    report = simulate_recorded_session(load_transcript(FIXTURES / "session_2_1.jsonl"))
    data = report.to_dict()
    json.dumps(data)
    assert data["calls"] == len(report.calls) > 0
    assert data["session"] == "session_2_1.jsonl"
    assert 0 <= data["simulated_cache_read_share"] <= 1
    assert report.simulated_cost_usd > 0 and report.recorded_cost_usd > 0


def test_a_transcript_without_calls() -> None:
    report = simulate_recorded_session(Transcript(entries=[Entry.user("hi")], format="claude-code"))
    assert report.calls == ()
    assert report.simulated_cache_read_share == 0.0


# -- the figures docs/caching.md and README.md state, at the precision they state them --------

IN_SAMPLE_TABLE = {
    # session file prefix: recorded %, simulated % (len/4), error pp, simulated % (o200k), error pp
    "d-kimuson-claude-code-viewer_fe5e1c67": (95.82, 95.97, 0.16, 95.85, 0.03),
    "marot-spotter_4d5611e5": (96.03, 96.70, 0.67, 96.67, 0.64),
    "marot-spotter_8463c716": (98.36, 98.34, -0.02, 98.34, -0.02),
    "marot-spotter_agent-a2898e3": (89.44, 89.57, 0.13, 89.51, 0.06),
    "marot-spotter_subagent": (93.97, 94.32, 0.35, 94.28, 0.31),
    "marot-spotter_tool_heavy": (83.25, 83.03, -0.23, 83.05, -0.20),
}
HELD_OUT_TABLE = {
    # session file prefix: calls, held-out error pp, in-sample error pp on the same calls
    "OpenPrintKit_codex-rollout": (456, -3.49, -3.49),
    "Smartagent-so-PAI_b566e56e": (227, 0.87, 0.92),
    "claude-code-log_0d3a8e6f": (15, -2.99, -1.99),
    "claude-code-log_37f83ec9": (105, 1.39, 1.39),
    "claude-code-log_a7da6a22": (103, -1.55, -1.56),
    "claude-code-log_agent-c8d9b115": (6, -6.78, -2.88),
    "d-kimuson-claude-code-viewer_fe5e1c67": (9, -0.13, 0.21),
    "marot-spotter_4d5611e5": (139, 1.51, 1.48),
    "marot-spotter_8463c716": (143, 0.00, -0.01),
    "marot-spotter_agent-a2898e3": (12, 0.31, 0.31),
    "marot-spotter_subagent": (12, -0.04, -0.03),
    "marot-spotter_tool_heavy": (4, -2.84, -0.59),
}


def _corpus_session(prefix: str) -> Path:
    matches = [p for p in CLAUDE if p.name.startswith(prefix)]
    if not matches:
        pytest.skip(f"{prefix} is not in ../shared/corpus/raw")
    assert len(matches) == 1, matches
    return matches[0]


@functools.cache
def _report(path: Path, *, exact: bool = False, fit_calls: int | None = None) -> FidelityReport:
    """One simulation per session and setting across these tests (they take seconds)."""
    counter = TiktokenCounter("o200k_base") if exact else None
    return simulate_recorded_session(load_transcript(path), counter=counter, fit_calls=fit_calls)


def _points(share: float) -> float:
    return share * 100


def _second_half_error(report: FidelityReport, start: int) -> float:
    judged = report.calls[start:]
    recorded = sum(c.recorded.cache_read_input_tokens for c in judged)
    simulated = sum(c.simulated.cache_read_input_tokens for c in judged)
    return simulated / sum(c.simulated.prompt_tokens for c in judged) - recorded / sum(
        c.recorded.prompt_tokens for c in judged
    )


@pytest.mark.corpus
@pytest.mark.parametrize("prefix", sorted(IN_SAMPLE_TABLE))
def test_docs_in_sample_table(prefix: str) -> None:
    """Each row of the in-sample table, to the hundredth of a point it prints."""
    path = _corpus_session(prefix)
    rough, exact = _report(path), _report(path, exact=True)
    measured = (
        _points(rough.recorded_cache_read_share),
        _points(rough.simulated_cache_read_share),
        _points(rough.share_error),
        _points(exact.simulated_cache_read_share),
        _points(exact.share_error),
    )
    assert measured == pytest.approx(IN_SAMPLE_TABLE[prefix], abs=0.005 + 1e-9)


@pytest.mark.corpus
@pytest.mark.parametrize("prefix", sorted(HELD_OUT_TABLE))
def test_docs_held_out_table(prefix: str) -> None:
    """Each row of the held-out table (fit on the first half, judge the second), to the
    hundredth of a point it prints."""
    path = _corpus_session(prefix)
    calls, held_out_pp, same_calls_pp = HELD_OUT_TABLE[prefix]
    in_sample = _report(path)
    assert len(in_sample.calls) == calls
    held_out = _report(path, fit_calls=calls // 2)
    assert _points(held_out.share_error) == pytest.approx(held_out_pp, abs=0.005 + 1e-9)
    assert _points(_second_half_error(in_sample, calls // 2)) == pytest.approx(
        same_calls_pp, abs=0.005 + 1e-9
    )


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("prefix", "recorded", "simulated"),
    [("marot-spotter_4d5611e5", 9.53, 9.06), ("marot-spotter_8463c716", 11.50, 11.53)],
)
def test_docs_costs_of_the_two_long_sessions(prefix: str, recorded: float, simulated: float) -> None:
    """"Recorded costs (Opus 4.6 prices) are $9.53 / $11.50 ...; simulated $9.06 / $11.53"."""
    report = _report(_corpus_session(prefix))
    assert report.model == "claude-opus-4-6"
    assert report.recorded_cost_usd == pytest.approx(recorded, abs=0.005)
    assert report.simulated_cost_usd == pytest.approx(simulated, abs=0.005)


def test_docs_summary_claims_follow_from_the_tables() -> None:
    """The sentences around the tables (and README's) say what the pinned rows say."""
    six = [row[2] for row in IN_SAMPLE_TABLE.values()]
    assert max(abs(e) for e in six) <= 0.7  # "these six are within 0.7 points"
    claude = {k: v for k, v in HELD_OUT_TABLE.items() if not k.startswith("OpenPrintKit")}
    assert len(claude) == 11 and len(HELD_OUT_TABLE) == 12  # "11 Claude Code sessions", "12"
    long = [v for v in claude.values() if v[0] >= 100]
    short = [v for v in claude.values() if v[0] < 100]
    assert len(long) == 5  # "the five Claude sessions of 100 calls or more"
    assert (min(v[1] for v in long), max(v[1] for v in long)) == (-1.55, 1.51)  # within 1.6
    assert round(max(abs(v[1] - v[2]) for v in long), 2) <= 0.05  # "within 0.05 points of the in-sample"
    assert {v[0] // 2 for v in short} == {2, 3, 4, 6, 7}  # "fitted on 2 to 7 calls"
    assert min(v[1] for v in short) == -6.78  # "reaches -6.78", README "up to 6.8"
    assert (min(v[1] for v in claude.values()), max(v[1] for v in claude.values())) == (-6.78, 1.51)


@pytest.mark.corpus
def test_docs_in_sample_range_and_codex(corpus: Path) -> None:
    """"Over all 11 Claude Code sessions the error ranges from -1.22 to +1.85 points" (README:
    "within 2 points"); the Codex rollout: 94.59 % recorded, 91.21 % simulated, -3.38 pp
    (o200k -3.37), $13.92 recorded against $16.31 simulated (README: "3.4")."""
    errors = []
    for prefix in HELD_OUT_TABLE:
        report = _report(_corpus_session(prefix))
        if load_model_table().get(report.model).provider == "anthropic":
            errors.append(_points(report.share_error))
    assert len(errors) == 11
    assert (round(min(errors), 2), round(max(errors), 2)) == (-1.22, 1.85)
    assert max(abs(e) for e in errors) <= 2  # README: "within 2 points" for Claude sessions
    codex = _corpus_session("OpenPrintKit_codex-rollout")
    report, exact = _report(codex), _report(codex, exact=True)
    assert (
        _points(report.recorded_cache_read_share),
        _points(report.simulated_cache_read_share),
        _points(report.share_error),
        _points(exact.share_error),
    ) == pytest.approx((94.59, 91.21, -3.38, -3.37), abs=0.005 + 1e-9)
    assert round(abs(_points(report.share_error)), 1) == 3.4
    assert report.recorded_cost_usd == pytest.approx(13.92, abs=0.005)
    assert report.simulated_cost_usd == pytest.approx(16.31, abs=0.005)


def test_a_call_earlier_in_its_conversation_gets_the_view_before_it() -> None:
    """Views are built as the calls go by; a call that stands earlier in its conversation
    than the one before it (a thread rebuild can order records apart from the file) gets the
    messages before its own place, as a fresh normalization gives them."""
    from unbounded.caching.fidelity import _LaidCall, _views
    from unbounded.model.normalize import normalize_messages

    chain = [
        Entry.user("first question"),
        Entry.assistant([{"type": "text", "text": "first answer"}]),
        Entry.user("second question"),
        Entry.assistant([{"type": "text", "text": "second answer"}]),
        Entry.user("third question"),
        Entry.assistant([{"type": "text", "text": "third answer"}]),
    ]

    def call(first: int, line: int) -> _LaidCall:
        return _LaidCall(chain, first, first, {}, None, line, None, True)

    calls = [call(3, 1), call(5, 2), call(1, 3)]
    views = [messages for _, messages in _views(calls)]
    assert views == [normalize_messages(chain[: c.first]) for c in calls]
