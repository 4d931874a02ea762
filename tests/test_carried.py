"""What every summary carries forward verbatim: standing instructions, the latest request, the
user messages; written as blocks and read back from a previous summary."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from unbounded.compaction.carried import (
    LATEST_HEADING,
    LATEST_REQUEST_CHARS,
    MAX_STANDING,
    RULE_MAX_CHARS,
    RULE_SOURCE_MAX_CHARS,
    STANDING_HEADING,
    carried_latest,
    carried_standing,
    carried_user_messages,
    escape_tags,
    quoted_request,
    render_latest,
    render_standing,
    sentences,
    standing_instructions,
)


def test_rules_are_the_sentences_that_set_one() -> None:
    request = (
        "Fix the login page. Never push to main. Use pnpm, not npm.\n"
        "Please make sure the old server keeps running. It is slow today."
    )
    assert standing_instructions([request]) == [
        "Never push to main.",
        "Use pnpm, not npm.",
        "Please make sure the old server keeps running.",
    ]
    # each wording the rule list knows, English and German
    for sentence in (
        "Always run the linter first.", "Don't touch the migrations.", "Do not rename files.",
        "You must keep the API stable.", "Ensure the tests stay green.", "Avoid new dependencies here.",
        "Only use the standard library.", "Write it in Go instead of Rust.", "Prefer tabs rather than spaces.",
        "From now on answer in German.", "We no longer support Python 3.8.", "Bitte immer auf Deutsch antworten.",
        "Niemals direkt auf main pushen.", "Stelle sicher, dass der Server läuft.", "Achte darauf, kurz zu bleiben.",
        "Auf keinen Fall die Datenbank löschen.", "Das brauchen wir nicht mehr.", "Nimm Postgres statt SQLite.",
        "Du solltest den Voice Server nutzen.", "Du musst die Tests laufen lassen.", "Du darfst nichts löschen.",
        "Nutze anstatt npm lieber pnpm.", "Du sollst nur lesen.", "Bitte use the staging key.",
    ):  # fmt: skip
        assert standing_instructions([sentence]) == [sentence], sentence
    assert standing_instructions(["Fix the parser and add a test."]) == []


def test_a_rule_needs_three_words_and_at_most_the_length_of_a_rule() -> None:
    assert standing_instructions(["Never again."]) == []
    assert standing_instructions(["Never do that."]) == ["Never do that."]
    long_rule = "Never " + "x" * (RULE_MAX_CHARS - 12) + " do it."
    assert len(long_rule) == RULE_MAX_CHARS + 1
    assert standing_instructions([long_rule]) == []
    assert standing_instructions([long_rule[1:]]) == []  # no longer starts with "Never"
    fitting = "Never " + "x" * (RULE_MAX_CHARS - 13) + " do it."
    assert standing_instructions([fitting]) == [fitting]


def test_a_pasted_document_sets_no_rules() -> None:
    document = "Never push to main. " + "filler " * RULE_SOURCE_MAX_CHARS
    assert standing_instructions([document]) == []
    at_limit = ("Never push to main.\n" + "y" * RULE_SOURCE_MAX_CHARS)[:RULE_SOURCE_MAX_CHARS]
    assert standing_instructions([at_limit]) == ["Never push to main."]


def test_rules_keep_the_newest_and_a_repeat_counts_as_new() -> None:
    rules = [f"Never touch module {n}." for n in range(MAX_STANDING + 2)]
    assert standing_instructions(rules) == rules[2:]
    assert standing_instructions(["Never push to main.", "Always lint first.", "never  push to MAIN."]) == [
        "Always lint first.",
        "never  push to MAIN.",
    ]
    # carried rules come first and are kept as they were written
    assert standing_instructions(["Always lint first."], ["Never push to main."]) == ["Never push to main.", "Always lint first."]
    assert standing_instructions([], ["Never push.", "never push."]) == ["Never push."]


def test_standing_block_round_trips() -> None:
    rules = ['Never push to main.', 'Use "pnpm", not npm.']
    lines = render_standing(rules, "   ")
    assert lines == ["   " + STANDING_HEADING, '   - "Never push to main."', '   - "Use "pnpm", not npm."']
    summary = "Summary:\n1. Intent:\n" + "\n".join(lines) + "\n   The first request: x\n"
    assert carried_standing(summary) == rules
    assert render_standing([]) == []
    assert carried_standing("no block here") == []
    # the last block wins (a ledger appended after a summary)
    twice = "\n".join([*render_standing(["Old rule here."]), "", *render_standing(["New rule here."])])
    assert carried_standing(twice) == ["New rule here."]


def test_latest_block_round_trips_with_its_lines() -> None:
    request = "Build the importer.\n\nSteps:\n1. parse\n2. store"
    lines = render_latest(request, "  ")
    assert lines[0] == "  " + LATEST_HEADING
    assert lines[1:] == ["  > Build the importer.", "  >", "  > Steps:", "  > 1. parse", "  > 2. store"]
    assert carried_latest("Summary:\n" + "\n".join(lines) + "\n  Next: go on") == request
    assert render_latest(None) == [] and render_latest("   ") == []
    assert carried_latest("nothing") is None
    assert carried_latest(LATEST_HEADING + "\nnot quoted") is None


@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs", "Zl", "Zp", "Cc")), max_size=40), min_size=1, max_size=6))
def test_any_short_request_survives_the_round_trip(parts: list[str]) -> None:
    request = "\n".join(part.strip() for part in parts).strip()
    if not request or "<" in request:
        return
    text = "\n".join(["Summary:", *render_latest(request, "   "), "2. Next:"])
    assert carried_latest(text) == "\n".join(line.strip() for line in request.split("\n"))


def test_a_long_request_keeps_its_beginning_and_end_cut_at_sentence_ends() -> None:
    head = "Please rebuild the exporter. " * 100
    tail = " Then run the tests and report." * 40
    request = head + "PASTED " * 2_000 + tail
    quoted = quoted_request(request)
    assert len(quoted) <= LATEST_REQUEST_CHARS + 80
    first, marker, last = quoted.split("\n")
    assert first.endswith("Please rebuild the exporter.")
    assert last.startswith("Then run the tests") and last.endswith("report.")
    assert marker == f"[… {len(request.strip()) - len(first) - len(last):,} characters of this message left out here …]"
    assert quoted_request("short request") == "short request"
    exact = "x" * LATEST_REQUEST_CHARS
    assert quoted_request(exact) == exact
    assert quoted_request(exact + "y") != exact + "y"
    # without sentence ends, the cut falls where the share says
    flat = "a" * (3 * LATEST_REQUEST_CHARS)
    first, _, last = quoted_request(flat).split("\n")
    assert len(first) == int(LATEST_REQUEST_CHARS * 0.7) and len(first) + len(last) == LATEST_REQUEST_CHARS


def test_tags_in_quotes_are_made_inert() -> None:
    assert escape_tags("a </summary> b <analysis> c <Summary>") == "a &lt;/summary&gt; b &lt;analysis&gt; c &lt;Summary&gt;"
    assert render_standing(["Never write </summary> here."]) [1] == '- "Never write &lt;/summary&gt; here."'
    assert render_latest("say <summary>")[1] == "> say &lt;summary&gt;"


def test_user_messages_of_any_summary_are_read_back() -> None:
    ours = (
        "6. All user messages:\n   Listed by the previous summary:\n   - \"Build it\"\n"
        "   - \"Use tabs\n   (The last of them is the latest request.)\n7. Pending Tasks:\n   - not a message\n"
    )
    assert carried_user_messages(ours) == ["Build it", "Use tabs"]
    ledger = 'Facts ledger:\nUser messages (3):\n- "one"\n- (4 more)\n- two"\nFiles read (1): a.py\n- nope'
    assert carried_user_messages(ledger) == ["one", "two"]
    assert carried_user_messages("6. All User Messages:\n- plain one\n- \"quoted\"") == ["plain one", "quoted"]
    assert carried_user_messages("- stray item") == []


def test_sentences_split_on_ends_and_lines() -> None:
    assert sentences("One. Two!\nThree? four. Five") == ["One.", "Two!", "Three? four.", "Five"]
    assert sentences("- item one\n* item two\n\n") == ["item one", "item two"]
