"""`replay --report FILE.html`: one self-contained page (inline SVG and CSS, no script, no
external resource) that works offline.

It shows the context size of every call with the thresholds and the compaction marks, the
cache reads and writes of every call, the cumulative cost of every strategy, the cost table
and the timeline of events. `render_report_html(report)` is pure: it returns the page.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

from unbounded.evaluation.replay import ReplayReport, cumulative, point_costs, strategy_names
from unbounded.evaluation.report_receipts import receipts_section

WIDTH = 1100
HEIGHT = 300
MARGIN_LEFT = 70
MARGIN_RIGHT = 150
MARGIN_TOP = 28
MARGIN_BOTTOM = 34

COLORS = {
    "unbounded": "#1f6feb",
    "recorded": "#6e7781",
    "none": "#cf222e",
    "truncate": "#bc4c00",
    "summarize_no_cache": "#8250df",
    "clear_every_turn": "#1a7f37",
}

CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 24px;
       color: #1f2328; background: #fff; max-width: 1180px; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #d0d7de; padding-bottom: 4px; }
.meta { color: #59636e; font-size: 13px; }
.figures { display: flex; flex-wrap: wrap; gap: 12px; margin: 16px 0; }
.figure { border: 1px solid #d0d7de; border-radius: 6px; padding: 8px 12px; min-width: 120px; }
.figure b { display: block; font-size: 20px; }
.figure span { color: #59636e; font-size: 12px; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border-bottom: 1px solid #d0d7de; padding: 4px 10px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
td.text { text-align: left; }
.timeline td { vertical-align: top; }
.timeline td.when { white-space: nowrap; }
.timeline th { text-align: left; }
.kind { font-family: ui-monospace, monospace; font-size: 12px; }
svg text { font-size: 11px; fill: #59636e; }
svg .label { fill: #1f2328; }
"""


@dataclass(frozen=True, slots=True)
class _Scale:
    """Maps call indices and values to SVG coordinates."""

    calls: int
    top: float

    def x(self, index: float) -> float:
        span = max(1, self.calls - 1)
        return MARGIN_LEFT + (WIDTH - MARGIN_LEFT - MARGIN_RIGHT) * index / span

    def y(self, value: float) -> float:
        height = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
        return MARGIN_TOP + height * (1 - min(value, self.top) / self.top if self.top else 1)


def _fmt_tokens(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 1_000:
        return f"{value / 1_000:.0f}k"
    return f"{value:.0f}"


def _axes(scale: _Scale, ticks: Sequence[float], label: str, money: bool = False) -> list[str]:
    parts = [
        f'<line x1="{MARGIN_LEFT}" y1="{HEIGHT - MARGIN_BOTTOM}" x2="{WIDTH - MARGIN_RIGHT}" '
        f'y2="{HEIGHT - MARGIN_BOTTOM}" stroke="#8c959f"/>',
        f'<line x1="{MARGIN_LEFT}" y1="{MARGIN_TOP}" x2="{MARGIN_LEFT}" '
        f'y2="{HEIGHT - MARGIN_BOTTOM}" stroke="#8c959f"/>',
        f'<text x="{WIDTH - MARGIN_RIGHT}" y="{HEIGHT - 6}" text-anchor="end">call</text>',
        f'<text x="{MARGIN_LEFT}" y="14" class="label">{html.escape(label)}</text>',
    ]
    for value in ticks:
        y = scale.y(value)
        text = f"${value:,.2f}" if money else _fmt_tokens(value)
        parts.append(
            f'<line x1="{MARGIN_LEFT - 4}" y1="{y:.1f}" x2="{WIDTH - MARGIN_RIGHT}" '
            f'y2="{y:.1f}" stroke="#eaeef2"/>'
            f'<text x="{MARGIN_LEFT - 8}" y="{y + 4:.1f}" text-anchor="end">{text}</text>'
        )
    step = max(1, round(scale.calls / 10))
    for index in range(0, scale.calls, step):
        parts.append(
            f'<text x="{scale.x(index):.1f}" y="{HEIGHT - MARGIN_BOTTOM + 16}" '
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


def _ticks(top: float, count: int = 5) -> list[float]:
    step = _nice_step(top, count)
    values: list[float] = []
    value = 0.0
    while value <= top + 1e-9:
        values.append(value)
        value += step
    return values


def _polyline(
    scale: _Scale,
    values: Sequence[float],
    color: str,
    *,
    width: float = 1.6,
    dash: str | None = None,
    title: str = "",
) -> str:
    points = " ".join(f"{scale.x(i):.1f},{scale.y(v):.1f}" for i, v in enumerate(values))
    style = f' stroke-dasharray="{dash}"' if dash else ""
    return (
        f'<polyline fill="none" stroke="{color}" stroke-width="{width}"{style} '
        f'points="{points}"><title>{html.escape(title)}</title></polyline>'
    )


def _legend(items: Sequence[tuple[str, str]], top: float = MARGIN_TOP) -> list[str]:
    parts = []
    for number, (name, color) in enumerate(items):
        y = top + 8 + number * 18
        x = WIDTH - MARGIN_RIGHT + 12
        parts.append(
            f'<rect x="{x}" y="{y - 8}" width="12" height="10" fill="{color}"/>'
            f'<text x="{x + 18}" y="{y + 1}" class="label">{html.escape(name)}</text>'
        )
    return parts


def _svg(parts: Sequence[str], title: str) -> str:
    return (
        f'<svg width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{html.escape(title)}">'
        + "".join(parts)
        + "</svg>"
    )


def context_chart(report: ReplayReport) -> str:
    """Context tokens per call: ours, the recorded session's and two baselines, with the
    thresholds and the compaction and microcompaction marks."""
    points = report.points
    calls = max(1, len(points))
    ours = [p.context_tokens for p in points]
    recorded = [p.recorded_context_tokens for p in points]
    series: list[tuple[str, list[float]]] = [("unbounded", [float(v) for v in ours])]
    if all(v is not None for v in recorded) and points:
        series.append(("recorded", [float(v or 0) for v in recorded]))
    for name in ("none", "truncate"):
        if points and name in points[0].baseline_context_tokens:
            series.append((name, [float(p.baseline_context_tokens[name]) for p in points]))
    window = report.context_window
    own = [max(values, default=0) for name, values in series if name in ("unbounded", "recorded")]
    top = max([window * 1.1, *(value * 1.05 for value in own)])
    clipped = [name for name, values in series if max(values, default=0) > top]
    scale = _Scale(calls, top)
    label = "context tokens per call"
    if clipped:
        label += f" ({', '.join(clipped)} clipped at the top of the chart)"
    parts = _axes(scale, _ticks(top), label)
    thresholds = report.thresholds
    label_x = MARGIN_LEFT + 6
    for value, color, name in (
        (window, "#1f2328", "window"),
        (thresholds.autocompact, "#cf222e", "auto-compact"),
        (thresholds.warning, "#d4a72c", "warning"),
    ):
        y = scale.y(value)
        text = f"{name} {_fmt_tokens(value)}"
        parts.append(
            f'<line x1="{MARGIN_LEFT}" y1="{y:.1f}" x2="{WIDTH - MARGIN_RIGHT}" y2="{y:.1f}" '
            f'stroke="{color}" stroke-dasharray="6 4"><title>{name} {value:,}</title></line>'
            f'<rect x="{label_x - 2}" y="{y - 13:.1f}" width="{len(text) * 6 + 4}" '
            f'height="12" fill="#ffffff" opacity="0.85"/>'
            f'<text x="{label_x}" y="{y - 3:.1f}" style="fill:{color}">{text}</text>'
        )
        label_x += len(text) * 6 + 16
    for point in points:
        x = scale.x(point.index)
        if point.compaction is not None:
            parts.append(
                f'<line x1="{x:.1f}" y1="{MARGIN_TOP}" x2="{x:.1f}" '
                f'y2="{HEIGHT - MARGIN_BOTTOM}" stroke="#8250df" stroke-width="2">'
                f"<title>call {point.index}: {point.compaction} compaction</title></line>"
            )
        if point.microcompact:
            parts.append(
                f'<path d="M{x - 5:.1f},{HEIGHT - MARGIN_BOTTOM - 1} l5,-9 l5,9 z" '
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
    legend = [(name, COLORS.get(name, "#57606a")) for name, _ in series]
    legend += [("compaction", "#8250df"), ("microcompact", "#1a7f37")]
    parts += _legend(legend)
    return _svg(parts, "context tokens per call")


def cache_chart(report: ReplayReport) -> str:
    """Our cache reads, cache writes and uncached input per call (stacked bars)."""
    points = report.points
    calls = max(1, len(points))
    top = max([1.0, *(p.context_tokens for p in points)]) * 1.05
    scale = _Scale(calls, top)
    parts = _axes(scale, _ticks(top), "tokens per call")
    width = max(1.0, (WIDTH - MARGIN_LEFT - MARGIN_RIGHT) / calls * 0.8)
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
    parts += _legend(
        [("cache read", "#2da44e"), ("cache write", "#fb8f44"), ("uncached input", "#8c959f")]
    )
    return _svg(parts, "cache reads and writes per call")


def cost_chart(report: ReplayReport) -> str:
    """Cumulative cost per strategy (and the recorded session's, when it has usage)."""
    points = report.points
    calls = max(1, len(points))
    names = [name for name in strategy_names() if name == "unbounded" or name in report.baselines]
    if report.recorded_cost is not None and report.recorded_comparable:
        names.insert(1, "recorded")
    series = [(name, cumulative(point_costs(points, name))) for name in names]
    top = max([0.01, *(values[-1] if values else 0.0 for _, values in series)]) * 1.02
    scale = _Scale(calls, top)
    parts = _axes(scale, _ticks(top), "cumulative cost (USD)", money=True)
    for name, values in reversed(series):
        parts.append(
            _polyline(
                scale,
                values,
                COLORS.get(name, "#57606a"),
                width=2.4 if name == "unbounded" else 1.5,
                dash="3 3" if name == "recorded" else None,
                title=f"{name}: ${values[-1]:,.2f}" if values else name,
            )
        )
    parts += _legend([(name, COLORS.get(name, "#57606a")) for name, _ in series])
    return _svg(parts, "cumulative cost per strategy")


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
    return "<table>" + "".join(rows) + "</table>"


def _ratio(value: float, reference: float) -> str:
    return f"{value / reference:.2f}×" if reference else ""


def _timeline(report: ReplayReport) -> str:
    if not report.timeline:
        return "<p class='meta'>No events.</p>"
    rows = ["<tr><th>call</th><th>time (UTC)</th><th>event</th><th>details</th></tr>"]
    for event in report.timeline:
        data = event.to_dict()
        rows.append(
            f"<tr><td>{event.call}</td>"
            f"<td class='text when'>{html.escape(data['time'].replace('T', ' '))}</td>"
            f"<td class='text kind'>{html.escape(event.kind)}</td>"
            f"<td class='text'>{html.escape(event.summary)}</td></tr>"
        )
    return "<table class='timeline'>" + "".join(rows) + "</table>"


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
    return "<table>" + "".join(rows) + "</table>"


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
        context_chart(report),
        "<h2>Prompt cache per call (unbounded)</h2>",
        cache_chart(report),
        "<h2>Cumulative cost per strategy</h2>",
        cost_chart(report),
        "<h2>Cost by strategy</h2>",
        _cost_table(report),
        "<h2>What our compactions kept (RETENTION.md)</h2>",
        _retention(report),
        "<h2>Timeline</h2>",
        _timeline(report),
        "<h2>Receipts: what each compaction took out</h2>",
        receipts_section(report),
    ]
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>unbounded replay: {html.escape(report.source)}</title>"
        f"<style>{CSS}</style></head><body>" + "\n".join(body) + "</body></html>\n"
    )
