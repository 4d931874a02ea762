"""The rules of `unbounded.compaction.large_output`, each held by a test that fails when the
rule is flipped, dropped or off by one (the mutation check runs these)."""

from __future__ import annotations

from typing import Any

from unbounded.compaction.large_output import (
    CHARS_PER_TOKEN,
    MIN_CAP_TOKENS,
    _cut_at_line,
    _marker,
    cap_block_texts,
    cap_text,
    is_kept_copy_of,
    is_shortened,
)
from unbounded.side_outputs import side_output_name
from unbounded.tokens.budget import cap_token_count

LOG = "".join(f"line {n:05d} of the build log\n" for n in range(2_000))  # 56,000 characters
CJK = "".join(f"第{n}行：上下文窗口压缩测试，中文文本的分词密度远高于英文。\n" for n in range(3_000))


def test_a_head_ends_on_a_newline_in_its_last_quarter() -> None:
    assert _cut_at_line("aaaaaaaaa\nbbbbbb", 12, from_end=False) == "aaaaaaaaa\n"  # newline at 9 = 12 - 12 // 4
    assert _cut_at_line("aaaaaaaa\nbbbbbbb", 12, from_end=False) == "aaaaaaaa\nbbb"  # at 8: too early, cut mid-line
    assert _cut_at_line("abc", 5, from_end=False) == "abc"


def test_a_tail_starts_after_a_newline_in_its_first_quarter() -> None:
    assert _cut_at_line("xxxxxxxa\nbcdefg", 8, from_end=True) == "bcdefg"  # newline at 1 < 8 // 4
    assert _cut_at_line("xxxxxxab\ncdefg", 8, from_end=True) == "ab\ncdefg"  # at 2: kept whole
    assert _cut_at_line("\nabcdefg", 8, from_end=True) == "abcdefg"  # at 0
    assert _cut_at_line("abc", 0, from_end=True) == "" and _cut_at_line("abc", 0, from_end=False) == ""
    assert _cut_at_line("abc", 1, from_end=True) == "c" and _cut_at_line("abc", 1, from_end=False) == "a"


def test_the_marker_says_what_was_left_out_and_where() -> None:
    capped = cap_text(LOG, 1_000, "/s/out.txt")
    assert capped is not None
    head, marker, tail = capped.text.partition("\n[... 53,200 characters (1,900 lines) of this output were left out here to fit the context window. ")
    assert marker and head == LOG[:1400] and tail.startswith("The complete output is saved in /s/out.txt: read the part you need from that file (by line range or with a search) instead of producing the whole output again. ...]\n")
    assert LOG.endswith(tail.split("...]\n", 1)[1])
    assert (capped.original_chars, capped.original_lines, capped.saved_to) == (56_000, 2_001, "/s/out.txt")
    unsaved = cap_text(LOG, 1_000, None)
    assert unsaved is not None and "The complete output was not kept. ...]\n" in unsaved.text


def test_the_cut_fits_the_cap_as_a_tokenizer_counts_and_no_more_than_needed() -> None:
    capped = cap_text(LOG, 1_000, "/s/out.txt")
    assert capped is not None and len(capped.text) == 3_064 and cap_token_count(capped.text) == 964
    dense = cap_text(CJK, 1_000, None)
    assert dense is not None and cap_token_count(dense.text) == 975 and len(dense.text) == 1_408
    short_dense = CJK[:2_000]  # fewer characters than the cap's, more tokens
    shortened = cap_text(short_dense, 1_000, None)
    assert shortened is not None and cap_token_count(shortened.text) == 971 and len(shortened.text) == 1_388
    floor = cap_text(LOG, 10, None)  # a cap below the floor is raised to it
    assert floor is not None and cap_token_count(floor.text) == 485 and MIN_CAP_TOKENS == 500
    assert cap_text("x" * (CHARS_PER_TOKEN * MIN_CAP_TOKENS), 10, None) is None  # fits the floor
    assert cap_text("x" * (CHARS_PER_TOKEN * MIN_CAP_TOKENS + 2), 10, None) is not None


def test_a_kept_copy_is_recognised_by_head_tail_and_length() -> None:
    capped = cap_text(LOG, 1_000, None)
    assert capped is not None and is_shortened(capped.text) and not is_shortened(LOG)
    assert is_kept_copy_of(LOG, capped.text)
    assert not is_kept_copy_of(LOG[:-1], capped.text)
    assert not is_kept_copy_of("X" + LOG[1:], capped.text)
    assert not is_kept_copy_of(LOG[:-2] + "X\n", capped.text)


def save_into(kept: dict[str, str]) -> Any:
    def save(name: str, text: str) -> str:
        kept[name] = text
        return f"/kept/{name}"

    return save


def test_blocks_are_cut_and_kept_by_position() -> None:
    kept: dict[str, str] = {}
    save = save_into(kept)
    small = {"type": "tool_result", "tool_use_id": "t", "content": "ok"}
    assert cap_block_texts(small, 1_000, "t", save) == (small, [])
    text_block = {"type": "text", "text": LOG}
    new, cut = cap_block_texts(text_block, 1_000, "u", save)
    assert len(cut) == 1 and new["text"] == cut[0].text and kept[side_output_name("u", 0)] == LOG
    assert cap_block_texts({"type": "text", "text": "short"}, 1_000, "u", save)[1] == []
    image = {"type": "image", "source": {"data": LOG}}
    assert cap_block_texts(image, 1_000, "i", save) == (image, [])
    as_string = {"type": "tool_result", "tool_use_id": "s", "content": LOG}
    new, cut = cap_block_texts(as_string, 1_000, "s", save)
    assert new["content"] == cut[0].text and new["tool_use_id"] == "s" and side_output_name("s", 0) in kept
    odd = {"type": "tool_result", "tool_use_id": "o", "content": 5}
    assert cap_block_texts(odd, 1_000, "o", save) == (odd, [])
    parts = {"type": "tool_result", "tool_use_id": "p", "content": [{"type": "text", "text": "head"}, {"type": "image", "source": {}}, {"type": "text", "text": LOG}, "junk"]}
    new, cut = cap_block_texts(parts, 1_000, "p", save)
    assert len(cut) == 1 and new["content"][0] == {"type": "text", "text": "head"} and new["content"][3] == "junk"
    assert new["content"][2]["text"] == cut[0].text and kept[side_output_name("p", 2)] == LOG
    unchanged = {"type": "tool_result", "tool_use_id": "q", "content": [{"type": "text", "text": "a"}]}
    assert cap_block_texts(unchanged, 1_000, "q", save)[0] is unchanged  # not even copied
    other = {"type": "web_search_tool_result", "tool_use_id": "w", "content": LOG}
    assert cap_block_texts(other, 1_000, "w", save)[0] is other  # only tool results and text are cut


def test_redaction_comes_before_the_cut_and_the_keeping() -> None:
    kept: dict[str, str] = {}
    secret_log = LOG.replace("build", "SECRET")
    new, cut = cap_block_texts({"type": "text", "text": secret_log}, 1_000, "r", save_into(kept), redact=lambda t: t.replace("SECRET", "[R]"))
    assert "SECRET" not in kept[side_output_name("r", 0)] and "SECRET" not in new["text"]
    assert is_kept_copy_of(kept[side_output_name("r", 0)], new["text"])
    assert cut[0].original_chars == len(secret_log.replace("SECRET", "[R]"))


def test_a_marker_that_takes_the_whole_cap_is_the_whole_answer() -> None:
    # A kept-copy path so long that the marker alone takes the whole cap (length / 4 rounds
    # up to it): no character of the output is kept beside it.
    text = "\n".join(f"line {n} of the output" for n in range(3_000))
    saved_to = "d/" + "a" * (CHARS_PER_TOKEN * MIN_CAP_TOKENS - 2 - len(_marker(text, "d/")))
    capped = cap_text(text, MIN_CAP_TOKENS, saved_to)
    assert capped is not None and capped.text == _marker(text, saved_to)
    assert capped.text.startswith(f"\n[... {len(text):,} characters (2,999 lines)")


def test_a_kept_copy_path_longer_than_the_cap_is_left_out_of_the_marker() -> None:
    # Regression: a marker naming a 2,400-character path is over the 500-token floor by
    # itself, and the capped text came back over the cap (664 tokens) instead of within it.
    saved_to = "d/" + "a" * 2_400
    capped = cap_text(LOG, MIN_CAP_TOKENS, saved_to)
    assert capped is not None and capped.saved_to == saved_to
    assert cap_token_count(capped.text) <= MIN_CAP_TOKENS
    assert saved_to not in capped.text and "complete output is kept" in capped.text
    assert is_kept_copy_of(LOG, capped.text)
    # A path that just fits is still shown, in a marker that is the whole answer.
    fitting = "d/" + "a" * (CHARS_PER_TOKEN * MIN_CAP_TOKENS - 2 - len(_marker(LOG, "d/")))
    shown = cap_text(LOG, MIN_CAP_TOKENS, fitting)
    assert shown is not None and shown.text == _marker(LOG, fitting)
    assert cap_token_count(shown.text) == MIN_CAP_TOKENS
    # A token more and the path is left out, and some of the output is kept again.
    over = fitting + "a" * CHARS_PER_TOKEN
    assert cap_token_count(_marker(LOG, over)) == MIN_CAP_TOKENS + 1
    longer = cap_text(LOG, MIN_CAP_TOKENS, over)
    assert longer is not None and fitting not in longer.text and longer.text.startswith("line 00000")
    assert cap_token_count(longer.text) <= MIN_CAP_TOKENS


def test_shrinking_goes_on_to_the_marker_alone_when_one_character_is_over_the_cap() -> None:
    # A 1,319-character path of digits (dense for the tokenizer) makes the marker exactly the
    # cap: every cut down to one character is over it, and only the marker alone fits.
    saved_to = ("/" + str(3**4_000))[:1_319]
    text = "x" * 3_000 + "語語"
    capped = cap_text(text, MIN_CAP_TOKENS, saved_to)
    assert capped is not None and capped.text == _marker(text, saved_to)
    assert cap_token_count(capped.text) == MIN_CAP_TOKENS
    assert cap_token_count(_marker(text[:-1], saved_to) + text[-1]) == MIN_CAP_TOKENS + 1
