"""Recorded calls held as columns: what a long recording keeps of each call in a few bytes.

A recording of 100,000 calls held as `ApiCall` / `BilledCall` objects keeps, per call, a usage
dict (and its nested dicts and integers), a timestamp, a uuid and the objects themselves: about
0.7 KB. Here each call is a row of fixed-width arrays and an object is built when it is asked
for, equal to the one it was made from:

- a usage dict is split into its shape (keys in order, nested dicts, the values that are not
  integers), kept once per distinct shape, and its integers, kept in one flat array;
- a timestamp written as Claude Code writes it (`2025-01-01T00:00:00.000Z`) is kept as
  milliseconds since year 1, a canonical uuid as two 64-bit halves, a model as a code
  into its names;
- anything else (a usage dict holding a list, a timestamp in another form) is kept as it
  came, for that call only.
"""

from __future__ import annotations

import re
import uuid as uuid_module
from array import array
from collections.abc import Iterable, Iterator, Sequence
from datetime import date
from functools import lru_cache
from typing import Any, cast, overload

from unbounded.model.content import Usage
from unbounded.model.transcript import ApiCall, BilledCall, CallPlace

_INT, _CONSTANT, _NESTED = 0, 1, 2
_Shape = tuple[tuple[str, int, Any], ...]
"""(key, kind, payload) per key in order: an integer (kept in the flat array), a constant
(the value itself), or a nested dict (its own shape)."""

_INT64 = (-(2**63), 2**63 - 1)
_STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", re.ASCII)
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_NONE = -1
_PLACES: tuple[CallPlace, ...] = ("thread", "branch", "side")


def _split(usage: dict[str, Any], ints: list[int]) -> _Shape | None:
    """The shape of `usage`, its integers appended to `ints` in the order the shape reads them;
    None when a value has no shape (a list, an integer past 64 bits): keep it as it came."""
    shape: list[tuple[str, int, Any]] = []
    for key, value in usage.items():
        if isinstance(value, int) and not isinstance(value, bool):
            if not _INT64[0] <= value <= _INT64[1]:
                return None
            ints.append(value)
            shape.append((key, _INT, None))
        elif isinstance(value, dict):
            nested = _split(value, ints)
            if nested is None:
                return None
            shape.append((key, _NESTED, nested))
        elif value is None or isinstance(value, str | float | bool):
            shape.append((key, _CONSTANT, value))
        else:
            return None
    return tuple(shape)


def _join(shape: _Shape, ints: Sequence[int], start: int) -> tuple[dict[str, Any], int]:
    """The dict of `shape` with its integers read from `ints` at `start`, and where they end."""
    built: dict[str, Any] = {}
    for key, kind, payload in shape:
        if kind == _INT:
            built[key] = ints[start]
            start += 1
        elif kind == _NESTED:
            built[key], start = _join(payload, ints, start)
        else:
            built[key] = payload
    return built, start


def _stamp_text(code: int) -> str:
    """The timestamp of a code made by `_stamp_code`."""
    day, rest = divmod(code, 86_400_000)
    seconds, milliseconds = divmod(rest, 1000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return f"{_day_text(day)}T{hour:02d}:{minute:02d}:{second:02d}.{milliseconds:03d}Z"


@lru_cache(maxsize=4096)
def _day_text(day: int) -> str:
    return date.fromordinal(day).isoformat()


@lru_cache(maxsize=4096)
def _day_code(text: str) -> int | None:
    """The ordinal of a `YYYY-MM-DD` date that reads back the same, else None."""
    try:
        day = date.fromisoformat(text)
    except ValueError:
        return None
    return day.toordinal() if day.isoformat() == text else None


def _stamp_code(text: str) -> int | None:
    """Milliseconds since day 1 of year 1 of a timestamp that reads back the same, else None
    (taken apart by position: the dates are few, and parsing each whole cost 13 us)."""
    if not _STAMP.fullmatch(text):
        return None
    day = _day_code(text[:10])
    hour, minute, second = int(text[11:13]), int(text[14:16]), int(text[17:19])
    if day is None or hour > 23 or minute > 59 or second > 59:
        return None
    return ((day * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + int(text[20:23])


def _uuid_code(text: str) -> int | None:
    """The 128-bit value of a uuid written canonically (lower case, dashed), else None."""
    return int(text.replace("-", ""), 16) if _UUID.fullmatch(text) else None


class _CallColumns:
    """The columns both kinds of call share: response id, usage, model, time, and for billed
    calls line, place and uuid."""

    def __init__(self) -> None:
        self._ids: list[str] = []
        self._row_of: dict[str, int] = {}
        self._shapes: list[_Shape] = []
        self._shape_codes: dict[_Shape, int] = {}
        self._shape: array[int] = array("i")
        self._start: array[int] = array("q")
        self._ints: array[int] = array("q")
        self._tail = _NONE
        """The row whose integers end `_ints`."""
        self._models: list[str] = []
        self._model_codes: dict[str, int] = {}
        self._model: array[int] = array("i")
        self._stamp: array[int] = array("q")
        self._loose: dict[tuple[int, str], Any] = {}
        """(row, column) -> a value kept as it came."""

    def __len__(self) -> int:
        return len(self._ids)

    def _row(self, message_id: str) -> int | None:
        return self._row_of.get(message_id)

    def _new_row(self, message_id: str) -> int:
        row = len(self._ids)
        self._ids.append(message_id)
        self._row_of[message_id] = row
        self._shape.append(_NONE)
        self._start.append(0)
        self._model.append(_NONE)
        self._stamp.append(_NONE)
        return row

    def _set_usage(self, row: int, usage: Usage) -> None:
        """Give the row this usage (a later line's replaces an earlier one's)."""
        self._loose.pop((row, "usage"), None)
        ints: list[int] = []
        shape = _split(cast(dict[str, Any], usage), ints)
        if shape is None:
            self._loose[row, "usage"] = usage
            self._shape[row] = _NONE
            return
        code = self._shape_codes.get(shape)
        if code is None:
            code = self._shape_codes[shape] = len(self._shapes)
            self._shapes.append(shape)
        if row == self._tail:
            # This row's integers end the array: a later line of the same response (they
            # come together) writes over them instead of leaving them behind.
            del self._ints[self._start[row] :]
        self._shape[row] = code
        self._start[row] = len(self._ints)
        self._ints.extend(ints)
        self._tail = row

    def _set_model(self, row: int, model: str | None) -> None:
        if model is None:
            self._model[row] = _NONE
            return
        code = self._model_codes.get(model)
        if code is None:
            code = self._model_codes[model] = len(self._models)
            self._models.append(model)
        self._model[row] = code

    def _set_stamp(self, row: int, timestamp: str | None) -> None:
        code = None if timestamp is None else _stamp_code(timestamp)
        if code is None:
            self._loose[row, "timestamp"] = timestamp
            code = 0
        self._stamp[row] = code

    def _usage(self, row: int) -> Usage:
        code = self._shape[row]
        if code == _NONE:
            return cast(Usage, self._loose[row, "usage"])
        built, _ = _join(self._shapes[code], self._ints, self._start[row])
        return cast(Usage, built)

    def _model_name(self, row: int) -> str | None:
        code = self._model[row]
        return None if code == _NONE else self._models[code]

    def _timestamp(self, row: int) -> str | None:
        if (row, "timestamp") in self._loose:
            return cast(str | None, self._loose[row, "timestamp"])
        return _stamp_text(self._stamp[row])

    def finish(self) -> None:
        """Let go of what only building needs (the row of each response id)."""
        self._row_of = {}


class ApiCallColumns(_CallColumns, Sequence[ApiCall]):
    """A thread's recorded calls (`indexed_api_calls`) as columns, in the order of their
    first line; each `ApiCall` is built when asked for."""

    def __init__(self) -> None:
        """No calls yet: `add` their lines in thread order."""
        super().__init__()
        self._first: array[int] = array("q")
        self._last: array[int] = array("q")

    @classmethod
    def of(cls, calls: Iterable[ApiCall]) -> ApiCallColumns:
        """The columns of these calls, in their order."""
        columns = cls()
        for call in calls:
            row = columns._new_row(call.message_id)
            columns._first.append(call.first)
            columns._last.append(call.last)
            columns._set_usage(row, call.usage)
            columns._set_model(row, call.model)
            columns._set_stamp(row, call.timestamp)
        columns.finish()
        return columns

    def add(
        self, index: int, message_id: str, usage: Usage, model: str | None, timestamp: str | None
    ) -> None:
        """Take in one line of a response at thread index `index` (as `indexed_api_calls`:
        the first line's index and time, the last line's index, usage and model)."""
        row = self._row(message_id)
        if row is None:
            row = self._new_row(message_id)
            self._first.append(index)
            self._last.append(index)
            self._set_stamp(row, timestamp)
        else:
            self._last[row] = index
        self._set_usage(row, usage)
        self._set_model(row, model)

    def message_ids(self) -> Iterator[str]:
        """The calls' response ids, in order, without building the calls."""
        return iter(self._ids)

    @overload
    def __getitem__(self, index: int) -> ApiCall: ...

    @overload
    def __getitem__(self, index: slice) -> list[ApiCall]: ...

    def __getitem__(self, index: int | slice) -> ApiCall | list[ApiCall]:
        if isinstance(index, slice):
            return [self[row] for row in range(len(self))[index]]
        row = range(len(self))[index]
        return ApiCall(
            message_id=self._ids[row],
            first=self._first[row],
            last=self._last[row],
            usage=self._usage(row),
            model=self._model_name(row),
            timestamp=self._timestamp(row),
        )


class BilledCallColumns(_CallColumns, Sequence[BilledCall]):
    """Billed calls (`responses_billed`) as columns, in the order first met; each
    `BilledCall` is built when asked for."""

    def __init__(self) -> None:
        """No calls yet: `add` them (or their lines) in file order."""
        super().__init__()
        self._line: array[int] = array("q")
        self._place: array[int] = array("b")
        self._uuid_high: array[int] = array("Q")
        self._uuid_low: array[int] = array("Q")

    @classmethod
    def of(cls, calls: Iterable[BilledCall]) -> BilledCallColumns:
        """The columns of these calls, in their order."""
        columns = cls()
        for call in calls:
            columns._append(
                call.message_id,
                call.usage,
                call.model,
                call.timestamp,
                call.line,
                call.place,
                call.uuid,
            )
        columns.finish()
        return columns

    def _append(
        self,
        message_id: str,
        usage: Usage,
        model: str | None,
        timestamp: str | None,
        line: int | None,
        place: CallPlace,
        uuid: str | None,
    ) -> int:
        row = self._new_row(message_id)
        self._line.append(_NONE)
        self._place.append(0)
        self._uuid_high.append(0)
        self._uuid_low.append(0)
        self._set_stamp(row, timestamp)
        self._set_line(row, line)
        self._set_rest(row, usage, model, place, uuid)
        return row

    def _set_line(self, row: int, line: int | None) -> None:
        if line is None or line < 0:
            self._loose[row, "line"] = line
        else:
            self._line[row] = line

    def _set_rest(
        self, row: int, usage: Usage, model: str | None, place: CallPlace, uuid: str | None
    ) -> None:
        self._set_usage(row, usage)
        self._set_model(row, model)
        self._place[row] = _PLACES.index(place)
        self._loose.pop((row, "uuid"), None)
        code = None if uuid is None else _uuid_code(uuid)
        if code is None:
            self._loose[row, "uuid"] = uuid
        else:
            self._uuid_high[row], self._uuid_low[row] = code >> 64, code & (2**64 - 1)

    def add(
        self,
        message_id: str,
        usage: Usage,
        model: str | None,
        timestamp: str | None,
        line: int | None,
        place: CallPlace,
        uuid: str | None,
    ) -> None:
        """Take in one line of a response (as `responses_billed`: the first line's time and
        line, the last line's usage, model, place and uuid)."""
        row = self._row(message_id)
        if row is None:
            self._append(message_id, usage, model, timestamp, line, place, uuid)
        else:
            self._set_rest(row, usage, model, place, uuid)

    def response_id(self, row: int) -> str:
        """The response id of one call, without building it."""
        return self._ids[row]

    def line(self, row: int) -> int | None:
        """The file line of one call's first line, without building it."""
        if (row, "line") in self._loose:
            return cast(int | None, self._loose[row, "line"])
        return self._line[row]

    def _uuid(self, row: int) -> str | None:
        if (row, "uuid") in self._loose:
            return cast(str | None, self._loose[row, "uuid"])
        value = (self._uuid_high[row] << 64) | self._uuid_low[row]
        return str(uuid_module.UUID(int=value))

    @overload
    def __getitem__(self, index: int) -> BilledCall: ...

    @overload
    def __getitem__(self, index: slice) -> list[BilledCall]: ...

    def __getitem__(self, index: int | slice) -> BilledCall | list[BilledCall]:
        if isinstance(index, slice):
            return [self[row] for row in range(len(self))[index]]
        row = range(len(self))[index]
        return BilledCall(
            message_id=self._ids[row],
            usage=self._usage(row),
            model=self._model_name(row),
            timestamp=self._timestamp(row),
            line=self.line(row),
            place=_PLACES[self._place[row]],
            uuid=self._uuid(row),
        )


__all__ = ["ApiCallColumns", "BilledCallColumns"]
