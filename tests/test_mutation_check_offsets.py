"""`scripts/mutation_check.py` places each mutation where its node is, on lines holding
characters outside ASCII too (ast's column offsets count UTF-8 bytes)."""

from __future__ import annotations

import warnings

from test_mutation_check_lines import _script

SOURCE = 'def f(t, n):\n    return f"{t} ×{n}" if n > 1 else t\n\n\ndef g(s):\n    if "…" in s: return s\n    return ""\n'


def _mutated(description: str) -> str:
    script = _script()
    found = [m for m in script.mutants("example.py", SOURCE) if m.description == description]
    assert len(found) == 1, [m.description for m in script.mutants("example.py", SOURCE)]
    return str(found[0].source)


def test_a_mutation_after_a_wide_character_lands_on_its_node() -> None:
    assert _mutated("constant 1 -> 2") == SOURCE.replace("n > 1 else", "n > 2 else")
    assert _mutated("`n > 1` -> `n <= 1`") == SOURCE.replace("n > 1 else", "n <= 1 else")
    negated = _mutated("condition negated: `n > 1`")
    assert negated == SOURCE.replace("if n > 1 else", "if not (n > 1) else")


def test_a_body_after_a_wide_character_is_dropped_whole() -> None:
    dropped = _mutated('early exit dropped: `if "…" in s:` body')
    assert dropped == SOURCE.replace('if "…" in s: return s', 'if "…" in s: pass')


def test_every_mutant_of_a_line_with_wide_characters_parses_without_a_warning() -> None:
    script = _script()
    for mutant in script.mutants("example.py", SOURCE):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            compile(mutant.source, "example.py", "exec", dont_inherit=True)
