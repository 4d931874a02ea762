"""What a Python function's signature means to a model: its tool definition (a JSON schema
of the parameters, descriptions from the docstring) and the conversion of the model's
arguments into the annotated types. Used by the agent loop (`agent_loop.Tool`).

Schemas: `str`, `int`, `float`, `bool`, `None`, lists, tuples, sets, dicts, `Literal`, `Enum`,
unions and `Optional`, `Annotated[T, "description"]`, dates and times, `UUID`, `Path`,
pydantic models (their own JSON schema), TypedDicts and dataclasses; a parameter with a
default is optional. The description is the docstring's text before its sections; a
Google-style `Args:` section describes the parameters. Arguments are converted with pydantic's
`TypeAdapter` when a parameter needs it (an Enum, a dataclass, a set…); without pydantic
such a tool is a `ConfigError` when it is made.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import inspect
import json
import re
import types
import typing
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from typing_extensions import is_typeddict

from unbounded.errors import ConfigError, ToolArgumentError

JsonSchema = dict[str, Any]

_SECTION = re.compile(
    r"^\s*(Args|Arguments|Parameters|Params|Returns|Return|Yields|Raises|Examples?|Notes?)\s*:\s*$"
)
_ARG_LINE = re.compile(r"^\s*\**(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def json_schema_for(annotation: Any) -> JsonSchema:
    """A JSON schema for a Python type annotation ({} when anything goes)."""
    if annotation is inspect.Parameter.empty or annotation is Any or annotation is object:
        return {}
    if annotation is None or annotation is type(None):
        return {"type": "null"}
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is typing.Annotated:
        schema = json_schema_for(args[0])
        notes = [a for a in args[1:] if isinstance(a, str)]
        if notes:
            schema = {**schema, "description": " ".join(notes)}
        return schema
    if origin is Literal:
        values = list(args)
        schema = {"enum": values}
        kinds = {_json_type(type(v)) for v in values}
        if len(kinds) == 1 and None not in kinds:
            schema["type"] = kinds.pop()
        return schema
    if origin is Union or origin is types.UnionType:
        arms = [a for a in args if a is not type(None)]
        if len(arms) == 1:
            return json_schema_for(arms[0])
        return {"anyOf": [json_schema_for(a) for a in args]}
    simple = _json_type(annotation)
    if simple is not None:
        return {"type": simple}
    text_format = _STRING_FORMATS.get(annotation)
    if text_format is not None:
        return {"type": "string", **({"format": text_format} if text_format else {})}
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return {"enum": [member.value for member in annotation]}
    if origin in (list, set, frozenset) or origin in _SEQUENCE_ORIGINS:
        return {"type": "array", "items": json_schema_for(args[0]) if args else {}}
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": json_schema_for(args[0])}
        return {
            "type": "array",
            "prefixItems": [json_schema_for(a) for a in args],
            "minItems": len(args),
            "maxItems": len(args),
        }
    if annotation in (list, tuple, set, frozenset):
        return {"type": "array"}
    if origin in (dict,) or origin in _MAPPING_ORIGINS:
        if len(args) == 2 and args[1] is not Any:
            return {"type": "object", "additionalProperties": json_schema_for(args[1])}
        return {"type": "object"}
    if annotation is dict:
        return {"type": "object"}
    model_schema = getattr(annotation, "model_json_schema", None)
    if callable(model_schema):
        return dict(model_schema())
    if is_typeddict(annotation):
        hints = typing.get_type_hints(annotation, include_extras=True)
        keys = sorted(getattr(annotation, "__required_keys__", hints))
        return _object_schema({k: json_schema_for(v) for k, v in hints.items()}, keys)
    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        hints = typing.get_type_hints(annotation, include_extras=True)
        props: dict[str, JsonSchema] = {}
        required: list[str] = []
        for item in dataclasses.fields(annotation):
            props[item.name] = json_schema_for(hints.get(item.name, Any))
            if item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING:
                required.append(item.name)
        return _object_schema(props, required)
    raise ConfigError(f"no JSON schema for the annotation {annotation!r}: use a simpler type")


_STRING_FORMATS: dict[Any, str] = {
    datetime.datetime: "date-time",
    datetime.date: "date",
    datetime.time: "time",
    uuid.UUID: "uuid",
    Path: "",
}
"""Types sent as JSON strings (the format, when JSON Schema has one)."""

_SEQUENCE_ORIGINS = (
    typing.get_origin(Sequence[int]),
    typing.get_origin(typing.List[int]),  # noqa: UP006
)
_MAPPING_ORIGINS = (typing.get_origin(Mapping[str, int]),)


def _json_type(kind: Any) -> str | None:
    if kind is bool:
        return "boolean"
    if kind is int:
        return "integer"
    if kind is float:
        return "number"
    if kind is str:
        return "string"
    if kind is type(None):
        return "null"
    return None


def _object_schema(properties: dict[str, JsonSchema], required: Sequence[str]) -> JsonSchema:
    schema: JsonSchema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """(description, {parameter: description}) from a docstring with a Google-style Args."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in lines:
        heading = _SECTION.match(line)
        if heading:
            section = heading.group(1).lower()
            current = None
            continue
        if section is None:
            description.append(line)
        elif section in ("args", "arguments", "parameters", "params"):
            match = _ARG_LINE.match(line)
            if match and not line.startswith((" " * 8, "\t\t")):
                current = match.group(1)
                params[current] = match.group(2).strip()
            elif current and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
    return "\n".join(description).strip(), params


def tool_schema(
    function: Callable[..., Any], *, name: str | None = None, description: str | None = None
) -> dict[str, Any]:
    """The Anthropic tool definition (name, description, input_schema) of a function."""
    signature = inspect.signature(function)
    try:
        hints = typing.get_type_hints(function, include_extras=True)
    except Exception as error:  # unresolved forward references
        raise ConfigError(f"cannot read the type hints of {function!r}: {error}") from None
    doc_description, doc_params = parse_docstring(inspect.getdoc(function))
    properties: dict[str, JsonSchema] = {}
    required: list[str] = []
    for parameter in signature.parameters.values():
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise ConfigError(
                f"tool {function.__name__}: *args and **kwargs cannot be described to a model; "
                "name every parameter"
            )
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise ConfigError(
                f"tool {function.__name__}: positional-only parameters cannot be passed by name"
            )
        schema = dict(json_schema_for(hints.get(parameter.name, parameter.annotation)))
        if parameter.name in doc_params and "description" not in schema:
            schema["description"] = doc_params[parameter.name]
        if parameter.default is inspect.Parameter.empty:
            required.append(parameter.name)
        elif _jsonable(parameter.default):
            schema["default"] = parameter.default
        properties[parameter.name] = schema
    tool_name = name or function.__name__
    if not re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", tool_name):
        raise ConfigError(
            f"tool name {tool_name!r} must be 1-64 letters, digits, '_' or '-' (the API's rule)"
        )
    return {
        "name": tool_name,
        "description": description or doc_description or tool_name.replace("_", " "),
        "input_schema": _object_schema(properties, required),
    }


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


_PLAIN_TYPES = (str, int, float, bool, type(None))


def _needs_conversion(annotation: Any) -> bool:
    """Whether JSON data must be converted to match the annotation (an Enum, a dataclass, a
    pydantic model, a set or tuple… anywhere inside it)."""
    if annotation in (inspect.Parameter.empty, Any, object) or annotation in _PLAIN_TYPES:
        return False
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        return _needs_conversion(get_args(annotation)[0])
    if origin is Literal:
        return False
    if origin in (list, dict, Union, types.UnionType) or origin in _SEQUENCE_ORIGINS + (
        _MAPPING_ORIGINS
    ):
        return any(_needs_conversion(a) for a in get_args(annotation) if a is not Ellipsis)
    return not (annotation in (list, dict) or is_typeddict(annotation))


class ArgumentConverter:
    """Checks a tool call's arguments against the function's signature and converts them into
    the annotated types (pydantic's `TypeAdapter`: an Enum from its value, a dataclass or a
    pydantic model from an object, a set or tuple from an array, a date from its ISO text)."""

    def __init__(self, function: Callable[..., Any], name: str) -> None:
        signature = inspect.signature(function)
        try:
            hints = typing.get_type_hints(function, include_extras=True)
        except Exception:  # unresolved forward references: tool_schema reports them
            hints = {}
        self.name = name
        self.parameters = list(signature.parameters)
        self.required = [
            p.name for p in signature.parameters.values() if p.default is inspect.Parameter.empty
        ]
        annotations = {
            p.name: hints.get(p.name, p.annotation) for p in signature.parameters.values()
        }
        self._adapters: dict[str, Any] = {}
        try:
            from pydantic import TypeAdapter
        except ImportError:
            needing = [n for n, a in annotations.items() if _needs_conversion(a)]
            if needing:
                raise ConfigError(
                    f"tool {name}: converting the arguments {', '.join(needing)} into their "
                    "annotated types needs pydantic (pip install pydantic)"
                ) from None
            return
        for parameter, annotation in annotations.items():
            if annotation not in (inspect.Parameter.empty, Any, object):
                self._adapters[parameter] = TypeAdapter(annotation)

    def convert(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments as the function's types; ToolArgumentError saying what is wrong."""
        problems: list[str] = []
        unknown = [key for key in arguments if key not in self.parameters]
        if unknown:
            problems.append(
                f"unexpected argument(s) {', '.join(map(repr, unknown))} "
                f"(it takes {', '.join(self.parameters) or 'none'})"
            )
        missing = [key for key in self.required if key not in arguments]
        if missing:
            problems.append(f"missing required argument(s) {', '.join(map(repr, missing))}")
        converted: dict[str, Any] = {}
        for key, value in arguments.items():
            adapter = self._adapters.get(key)
            if adapter is None:
                converted[key] = value
                continue
            try:
                converted[key] = adapter.validate_python(value)
            except Exception as error:
                problems.extend(_validation_problems(key, error))
        if problems:
            raise ToolArgumentError(f"invalid arguments for {self.name}: " + "; ".join(problems))
        return converted


def _validation_problems(key: str, error: Exception) -> list[str]:
    errors = getattr(error, "errors", None)
    if not callable(errors):
        return [f"{key}: {error}"]
    out: list[str] = []
    for item in errors():
        where = ".".join(str(part) for part in (key, *item.get("loc", ())))
        given = json.dumps(item.get("input"), default=str)[:80]
        out.append(f"{where}: {item.get('msg')} (got {given})")
    return out


__all__ = [
    "ArgumentConverter",
    "JsonSchema",
    "json_schema_for",
    "parse_docstring",
    "tool_schema",
]
