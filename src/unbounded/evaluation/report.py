"""`replay --report FILE.html`: one self-contained page (inline SVG and CSS, no script, no
external resource) that works offline.

It shows the context size of every call with the thresholds and the compaction marks, the
cache reads and writes of every call, the cumulative cost of every strategy, the cost table
with what each strategy does, what our compactions kept (and what the next turns needed), and
the timeline of events. Each chart is drawn twice, for a desktop and for a phone, and CSS
shows the one that fits. `render_report_html(report)` is pure: it returns the page.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from unbounded.evaluation.replay import ReplayReport, cumulative, point_costs, strategy_names
from unbounded.evaluation.report_receipts import receipts_section


@dataclass(frozen=True, slots=True)
class Frame:
    """A chart's size in SVG units: the plot area's margins, and where the legend goes."""

    width: int
    height: int
    left: int
    right: int
    top: int = 28
    bottom: int = 34
    legend_below: bool = False

    @property
    def plot_right(self) -> int:
        """x of the plot area's right edge."""
        return self.width - self.right

    @property
    def plot_bottom(self) -> int:
        """y of the plot area's bottom edge (the x axis)."""
        return self.height - self.bottom


WIDE = Frame(width=1100, height=300, left=70, right=150)
"""Desktop: the legend on the right."""
NARROW = Frame(width=360, height=240, left=46, right=10, legend_below=True)
"""Phones (the page shows it below 700 px): the legend below the plot, fewer ticks."""
LEGEND_ROW = 18
LEGEND_COLUMNS = 2

COLORS = {
    "unbounded": "#1f6feb",
    "recorded": "#6e7781",
    "none": "#cf222e",
    "truncate": "#bc4c00",
    "summarize_no_cache": "#8250df",
    "clear_every_turn": "#1a7f37",
}

STRATEGIES = {
    "recorded": "the session as it ran: its recorded usage, priced with the same model table.",
    "unbounded": "this library's policy: tool results cleared in cache-friendly batches "
    "(microcompaction), session notes kept on the side that become the summary without a "
    "model call, compacting early when that pays (the cache is cold anyway, or the "
    "conversation fills part of its room, 40 % by default), and otherwise a structured "
    "summary at the auto-compact threshold whose request shares the conversation's prompt "
    "cache. The tools and system prompt are cached for an hour, so a pause re-writes only "
    "the messages.",
    "none": "sends everything. A call over the context window is an overflow (the API would "
    "refuse it); it is still priced, as if the window were larger.",
    "truncate": "drops the oldest turns (a tool call with its result) until the request fits "
    "under the threshold; the cut moves at nearly every call, so the cache is missed.",
    "summarize_no_cache": "at the threshold, summarizes in a separate request without the "
    "system prompt, tools or cache markers, and replaces the history with the summary; the "
    "summary request is priced too.",
    "clear_every_turn": "over 100,000 tokens, clears every tool result but the 3 newest on "
    "each request (LangChain's ClearToolUsesEdit defaults); the prefix changes every call.",
}
"""What each strategy of the cost table does, as the page explains it."""

CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 24px;
       color: #1f2328; background: #fff; max-width: 1180px; }
h1 { font-size: 22px; margin-bottom: 4px; overflow-wrap: anywhere; }
h3 { font-size: 15px; margin-top: 20px; }
h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #d0d7de; padding-bottom: 4px; }
.meta { color: #59636e; font-size: 13px; }
.figures { display: flex; flex-wrap: wrap; gap: 12px; margin: 16px 0; }
.figure { border: 1px solid #d0d7de; border-radius: 6px; padding: 8px 12px; min-width: 120px; }
.figure b { display: block; font-size: 20px; }
.figure span { color: #59636e; font-size: 12px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border-bottom: 1px solid #d0d7de; padding: 4px 10px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
td.text { text-align: left; }
dl.strategies { font-size: 13px; }
dl.strategies dt { font-family: ui-monospace, monospace; margin-top: 6px; }
dl.strategies dd { margin-left: 16px; color: #424a53; }
.timeline td { vertical-align: top; }
.timeline td.when { white-space: nowrap; }
.timeline th { text-align: left; }
.kind { font-family: ui-monospace, monospace; font-size: 12px; }
.chart svg { width: 100%; height: auto; display: block; }
.chart.narrow { display: none; }
svg text { font-size: 11px; fill: #59636e; }
svg .label { fill: #1f2328; }
@media (max-width: 700px) {
  body { margin: 12px; }
  .chart.wide { display: none; }
  .chart.narrow { display: block; }
  .figure { min-width: 0; flex: 1 1 40%; }
  table { font-size: 12px; }
  th, td { padding: 3px 5px; }
  /* The cost table and the timeline as cards: a row per block, each figure labelled. */
  table.costs tr:first-child, table.timeline tr:first-child { display: none; }
  table.costs tr, table.timeline tr { display: block; border-bottom: 1px solid #d0d7de;
                                      padding: 4px 0; }
  table.costs td, table.timeline td { display: inline-block; border: 0; text-align: left;
                                      padding: 1px 8px 1px 0; }
  table.costs td:first-child { display: block; font-weight: 600; }
  table.costs td:empty { display: none; }
  table.costs td:nth-child(2)::before { content: "cost $"; }
  table.costs td:nth-child(3)::before { content: "vs unbounded "; }
  table.costs td:nth-child(4)::before { content: "summary calls "; }
  table.costs td:nth-child(5)::before { content: "overflows "; }
  table.costs td:nth-child(6)::before { content: "cache reads "; }
  table.costs td:nth-child(7)::before { content: "peak context "; }
  table.timeline td:first-child::before { content: "call "; }
  table.timeline td:nth-child(4) { display: block; }
  table.costs td::before, table.timeline td::before { color: #59636e; }
}
"""


@dataclass(frozen=True, slots=True)
class _Scale:
    """Maps call indices and values to SVG coordinates: call i at the middle of its band."""

    frame: Frame
    calls: int
    top: float

    @property
    def band(self) -> float:
        """Width of one call's band."""
        return (self.frame.plot_right - self.frame.left) / max(1, self.calls)

    def x(self, index: float) -> float:
        return self.frame.left + self.band * (index + 0.5)

    def y(self, value: float) -> float:
        frame = self.frame
        height = frame.plot_bottom - frame.top
        return frame.top + height * (1 - min(value, self.top) / self.top if self.top else 1)


def _fmt_tokens(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 1_000:
        return f"{value / 1_000:.0f}k"
    return f"{value:.0f}"


def _axes(scale: _Scale, ticks: Sequence[float], label: str, money: bool = False) -> list[str]:
    frame = scale.frame
    parts = [
        f'<line x1="{frame.left}" y1="{frame.plot_bottom}" x2="{frame.plot_right}" '
        f'y2="{frame.plot_bottom}" stroke="#8c959f"/>',
        f'<line x1="{frame.left}" y1="{frame.top}" x2="{frame.left}" '
        f'y2="{frame.plot_bottom}" stroke="#8c959f"/>',
        f'<text x="{frame.plot_right}" y="{frame.plot_bottom + 28}" text-anchor="end">call</text>',
        f'<text x="{frame.left}" y="14" class="label">{html.escape(label)}</text>',
    ]
    for value in ticks:
        y = scale.y(value)
        text = f"${value:,.2f}" if money else _fmt_tokens(value)
        parts.append(
            f'<line x1="{frame.left - 4}" y1="{y:.1f}" x2="{frame.plot_right}" '
            f'y2="{y:.1f}" stroke="#eaeef2"/>'
            f'<text x="{frame.left - 6}" y="{y + 4:.1f}" text-anchor="end">{text}</text>'
        )
    labels = max(2, (frame.plot_right - frame.left) // 60)  # one number per ~60 units
    step = max(1, math.ceil(scale.calls / labels))
    for index in range(0, scale.calls, step):
        parts.append(
            f'<text x="{scale.x(index):.1f}" y="{frame.plot_bottom + 14}" '
            f'text-anchor="middle">{index}</text>'
        )
    return parts


def _nice_step(top: float, count: int = 5) -> float:
    raw = max(top, 1e-9) / count
    magnitude = float(10.0 ** math.floor(math.log10(raw)))
    for factor in (1.0, 2.0, 2.5, 5.0, 10.0):
        if raw <= factor * magnitude:
            return factor * magnitude
    return 10.0 * magnitude


def _nice_top(value: float, count: int = 5) -> float:
    """`value` rounded up to a whole tick step, so the top of the axis carries a label."""
    step = _nice_step(value, count)
    return math.ceil(value / step - 1e-9) * step


def _ticks(top: float, count: int = 5) -> list[float]:
    step = _nice_step(top, count)
    values: list[float] = []
    value = 0.0
    while value <= top + 1e-9:
        values.append(value)
        value += step
    return values


def _segments(values: Sequence[float | None]) -> list[list[tuple[int, float]]]:
    """Runs of consecutive known values: a call without a value breaks the line."""
    runs: list[list[tuple[int, float]]] = []
    current: list[tuple[int, float]] = []
    for index, value in enumerate(values):
        if value is None:
            if current:
                runs.append(current)
            current = []
        else:
            current.append((index, value))
    if current:
        runs.append(current)
    return runs


def _polyline(
    scale: _Scale,
    values: Sequence[float | None],
    color: str,
    *,
    width: float = 1.6,
    dash: str | None = None,
    title: str = "",
) -> str:
    """The series as a line, with a gap where a value is missing (None) and a dot for a value
    with no neighbour (a one-call session)."""
    style = f' stroke-dasharray="{dash}"' if dash else ""
    parts = []
    for run in _segments(values):
        if len(run) == 1:
            index, value = run[0]
            parts.append(
                f'<circle cx="{scale.x(index):.1f}" cy="{scale.y(value):.1f}" '
                f'r="{max(2.5, width * 1.8):.1f}" fill="{color}"/>'
            )
            continue
        points = " ".join(f"{scale.x(i):.1f},{scale.y(v):.1f}" for i, v in run)
        parts.append(
            f'<polyline fill="none" stroke="{color}" stroke-width="{width}"{style} '
            f'points="{points}"/>'
        )
    return f"<g><title>{html.escape(title)}</title>{''.join(parts)}</g>"


def _legend(frame: Frame, items: Sequence[tuple[str, str]]) -> list[str]:
    parts = []
    for number, (name, color) in enumerate(items):
        if frame.legend_below:
            column_width = (frame.width - frame.left) // LEGEND_COLUMNS
            x = frame.left + (number % LEGEND_COLUMNS) * column_width
            y = frame.plot_bottom + frame.bottom + 4 + (number // LEGEND_COLUMNS) * LEGEND_ROW
        else:
            x = frame.plot_right + 12
            y = frame.top + 8 + number * LEGEND_ROW
        parts.append(
            f'<rect x="{x}" y="{y - 8}" width="12" height="10" fill="{color}"/>'
            f'<text x="{x + 18}" y="{y + 1}" class="label">{html.escape(name)}</text>'
        )
    return parts


def _svg(frame: Frame, parts: Sequence[str], title: str, legend_items: int) -> str:
    height = frame.height
    if frame.legend_below:
        height += math.ceil(legend_items / LEGEND_COLUMNS) * LEGEND_ROW + 4
    return (
        f'<svg width="{frame.width}" height="{height}" viewBox="0 0 {frame.width} {height}" '
        f'role="img" aria-label="{html.escape(title)}">' + "".join(parts) + "</svg>"
    )


def context_chart(report: ReplayReport, frame: Frame = WIDE) -> str:
    """Context tokens per call: ours, the recorded session's and two baselines, with the
    thresholds and the compaction and microcompaction marks."""
    points = report.points
    calls = max(1, len(points))
    recorded = [
        float(p.recorded_context_tokens) if p.recorded_context_tokens else None for p in points
    ]
    series: list[tuple[str, list[float | None]]] = [
        ("unbounded", [float(p.context_tokens) for p in points])
    ]
    if any(value is not None for value in recorded):
        series.append(("recorded", recorded))
    for name in ("none", "truncate"):
        if points and name in points[0].baseline_context_tokens:
            series.append((name, [float(p.baseline_context_tokens[name]) for p in points]))
    window = report.context_window
    own = [
        max((v for v in values if v is not None), default=0.0)
        for name, values in series
        if name in ("unbounded", "recorded")
    ]
    top = max([window * 1.1, *(value * 1.05 for value in own)])
    clipped = [
        name
        for name, values in series
        if max((v for v in values if v is not None), default=0.0) > top
    ]
    scale = _Scale(frame, calls, top)
    label = "context tokens per call"
    if clipped:
        runs_off = ", ".join(f"'{name}'" for name in clipped)
        label += f" ({runs_off} runs off the top)"
    parts = _axes(scale, _ticks(top, 4 if frame.legend_below else 5), label)
    thresholds = report.thresholds
    labels: list[str] = []  # drawn last, over the series, so no line crosses them
    label_x = frame.left + 6
    for value, color, name in (
        (window, "#1f2328", "window"),
        (thresholds.autocompact, "#cf222e", "auto-compact"),
        (thresholds.warning, "#d4a72c", "warning"),
    ):
        y = scale.y(value)
        text = f"{name} {_fmt_tokens(value)}"
        parts.append(
            f'<line x1="{frame.left}" y1="{y:.1f}" x2="{frame.plot_right}" y2="{y:.1f}" '
            f'stroke="{color}" stroke-dasharray="6 4"><title>{name} {value:,}</title></line>'
        )
        labels.append(
            f'<rect x="{label_x - 2}" y="{y - 13:.1f}" width="{len(text) * 6 + 4}" '
            f'height="12" fill="#ffffff" opacity="0.85"/>'
            f'<text x="{label_x}" y="{y - 3:.1f}" style="fill:{color}">{text}</text>'
        )
        label_x += len(text) * 6 + 12
    for point in points:
        x = scale.x(point.index)
        if point.compaction is not None:
            parts.append(
                f'<line x1="{x:.1f}" y1="{frame.top}" x2="{x:.1f}" '
                f'y2="{frame.plot_bottom}" stroke="#8250df" stroke-width="2">'
                f"<title>call {point.index}: {point.compaction} compaction</title></line>"
            )
        if point.microcompact:
            parts.append(
                f'<path d="M{x - 5:.1f},{frame.plot_bottom - 1} l5,-9 l5,9 z" '
                f'fill="#1a7f37"><title>call {point.index}: microcompaction</title></path>'
            )
    for name, values in reversed(series):
        faint = name in ("none", "truncate")
        parts.append(
            _polyline(
                scale,
                values,
                COLORS.get(name, "#57606a"),
                width=1.2 if faint else 2.0,
                dash="3 3" if name == "recorded" else None,
                title=name,
            )
        )
    parts += labels
    legend = [(name, COLORS.get(name, "#57606a")) for name, _ in series]
    legend += [("compaction", "#8250df"), ("microcompact", "#1a7f37")]
    parts += _legend(frame, legend)
    return _svg(frame, parts, "context tokens per call", len(legend))


def cache_chart(report: ReplayReport, frame: Frame = WIDE) -> str:
    """Our cache reads, cache writes and uncached input per call (stacked bars)."""
    points = report.points
    calls = max(1, len(points))
    ticks = 4 if frame.legend_below else 5
    top = _nice_top(max([1.0, *(p.context_tokens for p in points)]) * 1.05, ticks)
    scale = _Scale(frame, calls, top)
    parts = _axes(scale, _ticks(top, ticks), "tokens per call")
    # A bar fills most of its call's band, but never wider than 40 units (a one-call chart).
    width = max(1.0, min(40.0, scale.band * 0.8))
    for point in points:
        x = scale.x(point.index) - width / 2
        base = 0.0
        for value, color, name in (
            (point.cache_read, "#2da44e", "cache read"),
            (point.cache_write, "#fb8f44", "cache write"),
            (point.uncached_input, "#8c959f", "uncached input"),
        ):
            if value <= 0:
                continue
            y_top, y_bottom = scale.y(base + value), scale.y(base)
            parts.append(
                f'<rect x="{x:.1f}" y="{y_top:.1f}" width="{width:.1f}" '
                f'height="{max(0.5, y_bottom - y_top):.1f}" fill="{color}">'
                f"<title>call {point.index}: {name} {value:,}</title></rect>"
            )
            base += value
    legend = [("cache read", "#2da44e"), ("cache write", "#fb8f44"), ("uncached input", "#8c959f")]
    parts += _legend(frame, legend)
    return _svg(frame, parts, "cache reads and writes per call", len(legend))


def cost_chart(report: ReplayReport, frame: Frame = WIDE) -> str:
    """Cumulative cost per strategy (and the recorded session's, when it has usage)."""
    points = report.points
    calls = max(1, len(points))
    names = [name for name in strategy_names() if name == "unbounded" or name in report.baselines]
    if report.recorded_cost is not None and report.recorded_comparable:
        names.insert(1, "recorded")
    series = [(name, cumulative(point_costs(points, name))) for name in names]
    ticks = 4 if frame.legend_below else 5
    top = _nice_top(max([0.01, *(values[-1] if values else 0.0 for _, values in series)]), ticks)
    scale = _Scale(frame, calls, top)
    parts = _axes(scale, _ticks(top, ticks), "cumulative cost (USD)", money=True)
    for name, values in reversed(series):
        parts.append(
            _polyline(
                scale,
                list(values),
                COLORS.get(name, "#57606a"),
                width=2.4 if name == "unbounded" else 1.5,
                dash="3 3" if name == "recorded" else None,
                title=f"{name}: ${values[-1]:,.2f}" if values else name,
            )
        )
    legend = [(name, COLORS.get(name, "#57606a")) for name, _ in series]
    parts += _legend(frame, legend)
    return _svg(frame, parts, "cumulative cost per strategy", len(legend))


def _chart(draw: Callable[[ReplayReport, Frame], str], report: ReplayReport) -> str:
    """A chart twice: wide for desktops, narrow for phones (CSS shows one)."""
    return (
        f"<div class='chart wide'>{draw(report, WIDE)}</div>"
        f"<div class='chart narrow'>{draw(report, NARROW)}</div>"
    )


def _figure(value: str, label: str) -> str:
    return f'<div class="figure"><b>{html.escape(value)}</b><span>{html.escape(label)}</span></div>'


def _cost_table(report: ReplayReport) -> str:
    rows = [
        "<tr><th>strategy</th><th>cost (USD)</th><th>vs unbounded</th><th>summary calls</th>"
        "<th>overflows</th><th>cache read share</th><th>peak context</th></tr>"
    ]
    ours = report.ours.cost_usd
    runs = {"unbounded": report.ours, **report.baselines}
    if report.recorded_cost is not None:
        comparable = report.recorded_comparable
        label = "recorded" if comparable else f"recorded ({report.recorded_model})"
        versus = _ratio(report.recorded_cost, ours) if comparable else "not comparable"
        rows.append(
            f"<tr><td>{html.escape(label)}</td><td>{report.recorded_cost:,.2f}</td>"
            f"<td>{versus}</td><td></td><td></td>"
            f"<td>{report.fidelity.recorded_cache_read_share:.1%}</td><td></td></tr>"
        )
    for name, run in runs.items():
        rows.append(
            f"<tr><td>{html.escape(name)}</td><td>{run.cost_usd:,.2f}</td>"
            f"<td>{_ratio(run.cost_usd, ours)}</td><td>{len(run.side_calls)}</td>"
            f"<td>{run.overflows}</td><td>{run.cache_read_share:.1%}</td>"
            f"<td>{run.peak_context_tokens:,}</td></tr>"
        )
    return "<div class='scroll'><table class='costs'>" + "".join(rows) + "</table></div>"


def _cost_parts(report: ReplayReport) -> str:
    """Where each strategy's cost goes, so a difference can be traced to its cause."""
    rows = [
        "<tr><th>strategy</th><th>cache writes</th><th>cache reads</th>"
        "<th>input and output</th><th>summary calls</th></tr>"
    ]
    for name, run in {"unbounded": report.ours, **report.baselines}.items():
        parts = run.cost_parts()
        rows.append(
            f"<tr><td>{html.escape(name)}</td><td>{parts['cache_writes']:,.2f}</td>"
            f"<td>{parts['cache_reads']:,.2f}</td><td>{parts['input_and_output']:,.2f}</td>"
            f"<td>{parts['summary_calls']:,.2f}</td></tr>"
        )
    explained = (
        "<p class='meta'>Where the cost goes (USD). Cache writes follow every change of the "
        "prefix (a compaction, a cleared result, a pause longer than the cache's lifetime); "
        "cache reads grow with what each call carries; summary calls are the separate requests "
        "that wrote summaries.</p>"
    )
    table = "<div class='scroll'><table class='costs'>" + "".join(rows) + "</table></div>"
    return explained + table


def _strategies(report: ReplayReport) -> str:
    """What each row of the cost table is."""
    shown = ["unbounded", *report.baselines]
    if report.recorded_cost is not None:
        shown.insert(0, "recorded")
    items = "".join(
        f"<dt>{html.escape(name)}</dt><dd>{html.escape(STRATEGIES[name])}</dd>"
        for name in shown
        if name in STRATEGIES
    )
    return (
        "<dl class='strategies'>" + items + "</dl><p class='meta'>Every strategy is replayed "
        "on the same recorded calls, with the same system prompt + tools size, token counter "
        "and prompt-cache simulator; the recorded replies are reused, so only what each "
        "strategy sends differs.</p>"
    )


def _ratio(value: float, reference: float) -> str:
    return f"{value / reference:.2f}×" if reference else ""


def _timeline(report: ReplayReport) -> str:
    if not report.timeline:
        return "<p class='meta'>No compaction, microcompaction, cache break or warning.</p>"
    rows = ["<tr><th>call</th><th>time (UTC)</th><th>event</th><th>details</th></tr>"]
    for event in report.timeline:
        data = event.to_dict()
        rows.append(
            f"<tr><td>{event.call}</td>"
            f"<td class='text when'>{html.escape(data['time'].replace('T', ' '))}</td>"
            f"<td class='text kind'>{html.escape(event.kind)}</td>"
            f"<td class='text'>{html.escape(event.summary)}</td></tr>"
        )
    return "<div class='scroll'><table class='timeline'>" + "".join(rows) + "</table></div>"


def _retention(report: ReplayReport) -> str:
    if not report.compaction_records:
        return "<p class='meta'>No compaction in this replay.</p>"
    data = report.retention()
    rows = [
        "<tr><th>fact type</th><th>facts</th><th>kept in summary</th><th>kept in context</th></tr>"
    ]
    for name, values in data.items():
        if not isinstance(values, dict):
            continue
        summary = "—" if values["summary"] is None else f"{values['summary']:.0%}"
        full = "—" if values["full"] is None else f"{values['full']:.0%}"
        rows.append(
            f"<tr><td>{html.escape(name.replace('_', ' '))}</td><td>{values['facts']}</td>"
            f"<td>{summary}</td><td>{full}</td></tr>"
        )
    explained = (
        "<p class='meta'>At each of our compactions, the facts of the conversation before it "
        "(the user's prompts, the files modified and read, the errors, the commands run) and "
        "the share found in the summary alone, and in the whole context after the compaction "
        "(the summary, the files re-read and the messages kept). A fact counts as kept when its "
        "text (the first 80 characters of a prompt, 50 of an error, 40 of a command; a file's "
        "path) appears in the context.</p>"
    )
    return explained + "<div class='scroll'><table>" + "".join(rows) + "</table></div>"


def _continuation(report: ReplayReport) -> str:
    """The continuation diagnostics: of what the next 30 recorded turns after each compaction
    used, what the compacted context held, and how much of what it listed went unused."""
    data = report.continuation()
    if not data:
        return ""
    rows = [
        "<tr><th>used next</th><th>summary: recall / precision</th>"
        "<th>context: recall / precision</th></tr>"
    ]
    for kind, contexts in data.items():
        cells = [_recall_precision(contexts.get(context)) for context in ("summary", "full")]
        rows.append(
            f"<tr><td>{html.escape(kind)}</td><td>{cells[0]}</td><td>{cells[1]}</td></tr>"
        )
    return (
        "<h3>What the next turns needed (a diagnostic)</h3><p class='meta'>Of the files, code "
        "tokens and commands the recorded agent used in the 30 turns after each compaction "
        "and could have known before it, the share the compacted context held (recall), and "
        "of what the context listed, the share the agent used (precision). A diagnostic, not "
        "a verdict on the hand-over: <code>unbounded eval --llm MODEL</code> examines that."
        "</p><div class='scroll'><table>" + "".join(rows) + "</table></div>"
    )


def _recall_precision(figures: dict[str, float | None] | None) -> str:
    if not figures or figures.get("recall") is None:
        return "—"
    recall, precision = figures["recall"], figures.get("precision")
    shown = f"{recall:.0%}" + (f" / {precision:.0%}" if precision is not None else " / —")
    return html.escape(shown)


def render_report_html(report: ReplayReport) -> str:
    """The whole report page."""
    fidelity = report.fidelity
    figures = [
        _figure(f"{report.calls:,}", "calls replayed"),
        _figure(str(report.compactions), "compactions"),
        _figure(str(report.microcompacts), "microcompactions"),
        _figure(str(report.cache_breaks), "cache breaks"),
        _figure(f"{report.ours.peak_context_tokens:,}", "peak context tokens"),
        _figure(f"{report.ours.cache_read_share:.1%}", "cache read share"),
        _figure(f"${report.ours.cost_usd:,.2f}", "cost with unbounded"),
    ]
    if report.recorded_cost is not None:
        label = "recorded cost" if report.recorded_comparable else "recorded cost (not comparable)"
        figures.append(_figure(f"${report.recorded_cost:,.2f}", label))
    meta = (
        f"model {html.escape(report.model)} · window {report.context_window:,} tokens · "
        f"auto-compact at {report.thresholds.autocompact:,} · summarizer "
        f"{html.escape(report.summarizer)} · cache TTL {report.ttl} · system prompt + tools "
        f"modelled as {report.prefix.tokens:,} tokens ({report.prefix.source})"
    )
    if fidelity.calls:
        meta += (
            " · simulator fidelity on the recorded calls: "
            f"{fidelity.simulated_cache_read_share:.1%} simulated vs "
            f"{fidelity.recorded_cache_read_share:.1%} recorded cache reads"
        )
    body = [
        f"<h1>unbounded replay: {html.escape(report.source)}</h1>",
        f"<p class='meta'>{meta}</p>",
        "<div class='figures'>" + "".join(figures) + "</div>",
        "<h2>Context size per call</h2>",
        _chart(context_chart, report),
        "<h2>Prompt cache per call (unbounded)</h2>",
        _chart(cache_chart, report),
        "<h2>Cumulative cost per strategy</h2>",
        _chart(cost_chart, report),
        "<h2>Cost by strategy</h2>",
        _cost_table(report),
        _strategies(report),
        "<h3>Where the cost goes</h3>",
        _cost_parts(report),
        "<h2>What our compactions kept</h2>",
        _retention(report),
        _continuation(report),
        "<h2>Timeline</h2>",
        _timeline(report),
        "<h2>Receipts: what each compaction took out</h2>",
        receipts_section(report),
    ]
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>unbounded replay: {html.escape(report.source)}</title>"
        f"<style>{CSS}</style></head><body>" + "\n".join(body) + "</body></html>\n"
    )
