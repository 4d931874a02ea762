"""Counting a text against a hard cap: a capped tool result, a recall answer.

The running context estimate counts length / 4, which is right on average for English and
code but counts CJK text at about a third of what a tokenizer does (a Chinese answer cut to
20,000 characters for a 5,000-token cap is about 13,700 `o200k_base` tokens). A cap must hold
whatever the text, so `cap_token_count` takes the larger of length / 4 and the `o200k_base`
count (the offline proxy for Claude's tokenizer, `tokens.exact`), and `cut_to_tokens` cuts a
text until that count fits. A text whose UTF-8 size is within the cap fits without being
encoded (a byte-level tokenizer never makes more tokens than bytes).
"""

from __future__ import annotations

from unbounded.tokens.estimate import rough_token_count
from unbounded.tokens.exact import TiktokenCounter

CUT_MARK = "…"
"""Ends a text `cut_to_tokens` shortened."""
_counter: TiktokenCounter | None = None


def _tokenizer() -> TiktokenCounter:
    global _counter
    if _counter is None:
        _counter = TiktokenCounter("o200k_base")
    return _counter


def cap_token_count(text: str) -> int:
    """Tokens of `text` as a cap counts them: max(length / 4, the o200k_base count)."""
    return max(rough_token_count(text), _tokenizer().count_text(text))


def fits(text: str, max_tokens: int) -> bool:
    """Whether `text` is within `max_tokens` as a cap counts them (encoded only when needed)."""
    if len(text.encode("utf-8", "surrogatepass")) <= max_tokens:
        return True
    if rough_token_count(text) > max_tokens:
        return False
    return _tokenizer().count_text(text) <= max_tokens


def cut_to_tokens(text: str, max_tokens: int, *, mark: str = CUT_MARK) -> str:
    """`text` when it fits in `max_tokens`; else its start, ending with `mark`, that fits."""
    if fits(text, max_tokens):
        return text
    limit = min(len(text), max(0, max_tokens) * 4)
    while limit > 0:
        cut = text[:limit] + mark
        count = cap_token_count(cut)
        if count <= max_tokens:
            return cut
        # Shrink in proportion (a little more, so it converges in a few rounds).
        limit = min(limit - 1, limit * max_tokens * 95 // (count * 100))
    return mark if cap_token_count(mark) <= max_tokens else ""
