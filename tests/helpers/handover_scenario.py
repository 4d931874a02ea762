"""One conversation that uses every part of the offline hand-over: the golden texts in
tests/fixtures/handover/ are its rendering at each level."""

from __future__ import annotations

from typing import Any

from conversation import bash, edit, read, result, says, use, user, write

from unbounded.compaction.carried import render_latest, render_standing

ROOT = "/home/dev/shop"

PREVIOUS = "\n".join(
    [
        "This session continues an earlier conversation that ran out of context.",
        "Summary:",
        "1. Primary Request and Intent:",
        "   Add a CSV export to the shop's admin.",
        *render_standing(["Never push to main, open a pull request."], "   "),
        *render_latest("Start with the orders export.", "   "),
        "2. Key Technical Concepts:",
        "   - Django",
        "6. All user messages:",
        '   - "Add a CSV export to the shop\'s admin."',
        '   - "Start with the orders export."',
        "7. Pending Tasks:",
        "   - none",
    ]
)

PLAN = (
    "Orders export works. Next:\n\n1. **Exporter** - add the refunds columns\n"
    "2. `templates/admin/export.html` - add the button\n3. tell the user"
)

REPORT = (
    "Status so far:\n| Step | State |\n|---|---|\n| orders export | done |\n| refunds | open |\n"
    + "The orders export writes one row per order line, sorted by date. " * 6
)


def scenario() -> list[Any]:
    """The conversation (plain API messages)."""
    todos = [
        {"content": "orders export", "status": "completed"},
        {"content": "refunds export", "status": "in_progress"},
        {"content": "export button"},
    ]
    return [
        user(PREVIOUS),
        user(f"<system-reminder>\nInstructions from {ROOT}/CLAUDE.md:\nRun make test before committing.\n</system-reminder>"),
        user("Keep going with the export. Always run make lint first."),
        *bash("t1", "bd show shop-7", "○ shop-7 · Refunds in the CSV export   [● P2 · OPEN]\nFiles:\n- shop/exporter.py\n- templates/admin/export.html\n- docs/export.md"),
        *bash("t2", "bd update shop-7 --status in_progress", "✓ Updated issue: shop-7"),
        *bash("t3", "bd close shop-6", "✓ Closed shop-6"),
        use("td", "TodoWrite", todos=todos),
        result("td", "ok"),
        *read("r1", f"{ROOT}/shop/models.py"),
        *read("r2", f"{ROOT}/shop/views.py"),
        *edit("e1", f"{ROOT}/shop/exporter.py", "def export_orders(rows):\n    return sorted(rows, key=date)"),
        *bash("c1", "make test", "FAILED tests/test_export.py::test_order - KeyError: 'date'\n1 failed, 9 passed"),
        says("The rows have no date key because the query drops it. I will select it too."),
        *edit("e2", f"{ROOT}/shop/queries.py", "def order_rows():\n    return Order.objects.values('id', 'date')"),
        *bash("c2", "make test", "10 passed"),
        *bash("c3", "make lint", "All checks passed"),
        *bash("g1", "git add -A && git commit -m 'feat: orders CSV export'", "[shop-7 9f8e7d6] feat: orders CSV export\n 2 files changed, 14 insertions(+)"),
        *bash("g2", "git push origin shop-7", "To github.com:dev/shop.git\n   1a2b3c4..9f8e7d6  shop-7 -> shop-7"),
        says(REPORT),
        user("Now the refunds. Use pnpm, not npm, for the front end.\n1) refunds columns 2) the export button"),
        says(PLAN),
        *write("w1", f"{ROOT}/shop/exporter.py", "class Exporter:\n    def refunds(self):\n        return []\n\n# see docs/refunds.md\n"),
        *bash("n1", "pnpm install", "Done in 2s"),
        *bash("c4", "make test", "Traceback (most recent call last):\n  File \"exporter.py\", line 3\nTypeError: refunds() missing 1 required argument"),
        says("Next I will pass the order to refunds()."),
        use("a1", "Task", description="Find the refunds model"),
        result("a1", "The refunds live in shop/refunds.py.\nModel: Refund(order, amount)."),
        *bash("g3", "git status --short", " M shop/exporter.py"),
        user("<task-notification>\n<task-id>bg1</task-id>\n<status>completed</status>\n<summary>Nightly build passed</summary>\n</task-notification>"),
    ]
