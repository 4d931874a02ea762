"""What a replay keeps of a recorded session: its script and facts, not the loaded transcript.

A loaded transcript holds every record of the file, progress and hook records included, and
most of them are not fed to a replay. `ReplayRecording.of` takes what a replay reads from
it (the replay script, the facts priced or reported, and the recorded future the
continuation scores look ahead into) and, once the recording has been simulated for the
replayed model, lets the transcript go: a caller that drops its own reference frees it.

`unbounded.evaluation.recording_stream.open_recording` prepares a file without loading it: a
Claude Code file is read in two passes and its script's steps are read from the file as the
replay reaches them; other formats, which are small, are loaded and prepared with `of`.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field

from unbounded.caching.fidelity import (
    FidelityReport,
    RecordedConversation,
    simulate_recorded_session,
)
from unbounded.catalog import ModelInfo
from unbounded.errors import ConfigError
from unbounded.evaluation.file_thread import FileThread
from unbounded.evaluation.recorded import RecordShape, ReplayScript, build_replay_script
from unbounded.model.entries import Entry
from unbounded.model.transcript import BilledCall, Transcript


def _looked_ahead(record: RecordShape) -> bool:
    """A record `used_in_turns` reads: a boundary (where it stops) or a real response."""
    if record.is_compact_boundary:
        return True
    return record.type == "assistant" and not record.is_synthetic_api_error


_KEPT_FIELDS = ("type", "subtype", "uuid", "isApiErrorMessage")


def _slim(entry: Entry) -> Entry:
    """The fields `used_in_turns` reads of a record: its type, ids and tool calls (the
    blocks themselves, shared with the script), not the whole record."""
    data = {key: entry.data[key] for key in _KEPT_FIELDS if key in entry.data}
    message = entry.message
    if message is not None:
        content = message.get("content")
        calls = (
            [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
            if isinstance(content, list)
            else []
        )
        kept = {key: message[key] for key in ("id", "model") if key in message}
        data["message"] = {**kept, "content": calls}
    return Entry(data, entry.line)


@dataclass(frozen=True, slots=True)
class RecordedFuture:
    """The main thread's boundaries and responses, found by main-thread index, each cut to
    what the continuation scores read of what the recording did next (`_slim`)."""

    positions: Sequence[int]
    """Main-thread index of each kept record, ascending."""
    entries: Sequence[Entry]

    @classmethod
    def of(cls, main: Sequence[Entry]) -> RecordedFuture:
        """The looked-ahead records of a main thread."""
        kept = [(index, entry) for index, entry in enumerate(main) if _looked_ahead(entry)]
        return cls(tuple(index for index, _ in kept), tuple(_slim(entry) for _, entry in kept))

    @classmethod
    def in_file(cls, shapes: Sequence[RecordShape], main: FileThread) -> RecordedFuture:
        """The looked-ahead records of a main thread read from a file, known by the shapes
        of its records: kept as places in the file and read when looked into, whole (what
        `_slim` keeps of them reads the same)."""
        positions = array(
            "q", (index for index, shape in enumerate(shapes) if _looked_ahead(shape))
        )
        return cls(positions, main.subset(positions))

    def after(self, first: int) -> Sequence[Entry]:
        """The kept records at main-thread index `first` and later, in order."""
        start = bisect_left(self.positions, first)
        if isinstance(self.entries, FileThread):
            return self.entries.tail(start)  # read as it is looked into
        return self.entries[start:]


@dataclass(slots=True)
class ReplayRecording:
    """A recorded session prepared for replay (module docstring)."""

    script: ReplayScript
    future: RecordedFuture
    model: str | None
    provider: str | None
    models: dict[str, int]
    billed: list[BilledCall]
    """The billed calls the script does not replay (on branches, the agent's side calls, a
    thread call out of order): the replay prices them as recorded. The replayed ones are
    priced from each step's own records, so they are counted (`billed_calls`), not kept."""
    billed_calls: int
    """Every billed call of the recording (`Transcript.billed_calls`)."""
    reported_window: int | None
    name: str | None
    """The file name, when the transcript came from a file."""
    replies: bool
    """The main thread holds a model reply (else there is nothing to replay)."""
    _source: Transcript | RecordedConversation | None
    """What the fidelity simulation reads, until it has run once."""
    warnings: tuple[str, ...] = ()
    """What reading the file and choosing the thread noticed."""
    skipped_lines: int = 0
    """Invalid lines left out with `skip_invalid`."""
    _fidelity: dict[str, FidelityReport] = field(default_factory=dict)

    @classmethod
    def of(cls, transcript: Transcript) -> ReplayRecording:
        """Prepare a transcript; it is kept only until `fidelity` has run once."""
        main = transcript.main_thread()
        script = build_replay_script(transcript)
        billed = transcript.billed_calls()
        return cls(
            script=script,
            future=RecordedFuture.of(main),
            model=transcript.model,
            provider=transcript.provider,
            models=transcript.models(),
            billed=not_replayed(billed, script),
            billed_calls=len(billed),
            reported_window=transcript.reported_window,
            name=transcript.path.name if transcript.path is not None else None,
            replies=any(e.type == "assistant" and not e.is_synthetic_api_error for e in main),
            _source=transcript,
            warnings=tuple(transcript.warnings),
            skipped_lines=transcript.skipped_lines,
        )

    @property
    def holds_transcript(self) -> bool:
        """What the simulation reads (the loaded transcript, or the file's record summaries)
        is still referenced (before the first `fidelity`)."""
        return self._source is not None

    def fidelity(self, model: ModelInfo) -> FidelityReport:
        """The recording simulated on `model`, computed once per model name. The first call
        lets the transcript go: a replay and its variants simulate on one model."""
        known = self._fidelity.get(model.name)
        if known is not None:
            return known
        if self._source is None:
            simulated = ", ".join(sorted(self._fidelity))
            raise ConfigError(
                f"this replay recording was simulated on {simulated} and has let its "
                f"transcript go: prepare it again with ReplayRecording.of(transcript) or "
                f"open_recording(path) to replay it on {model.name}"
            )
        report = simulate_recorded_session(self._source, model)
        self._fidelity[model.name] = report
        self._source = None
        return report


def not_replayed(billed: Sequence[BilledCall], script: ReplayScript) -> list[BilledCall]:
    """The billed calls whose response id no step of the script replays, in order."""
    replayed = set(script.message_ids)
    return [call for call in billed if call.message_id not in replayed]


__all__ = ["RecordedFuture", "ReplayRecording", "not_replayed"]
