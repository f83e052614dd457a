"""The report's two figures, as SVG data URIs, so that the page is one self-contained file that loads nothing
from elsewhere. Drawn on matplotlib Figures of their own (no pyplot), so nothing global changes in the caller."""

from __future__ import annotations

import base64
import io
import math

from autograder.report.analysis import Item
from autograder.report.data import ClassData, points


def figure_uri(figure) -> str:
    """A matplotlib figure as an SVG data URI: vector, inline, its ids kept apart from the page's."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    return "data:image/svg+xml;base64," + base64.b64encode(buffer.getvalue()).decode()


def figures(data: ClassData, items: list[Item]) -> dict[str, str]:
    """The figures, drawn on matplotlib Figures of their own (no pyplot: nothing global changes)."""
    import matplotlib

    with matplotlib.rc_context({"svg.fonttype": "none", "font.size": 10, "svg.hashsalt": "class-report"}):
        return {"scores": score_figure(data), "checks": check_figure(items)}


def score_figure(data: ClassData) -> str:
    """A histogram of the totals after late penalties, one bar per point (per 20th of the maximum above 40)."""
    from matplotlib.figure import Figure

    totals = [result.final for result in data.results]
    top = data.max_score
    width = 1.0 if top <= 40 else top / 20
    edges = [i * width for i in range(int(math.ceil(top / width)) + 2)]
    figure = Figure(figsize=(7, 2.8))
    axes = figure.subplots()
    axes.hist(totals, bins=edges, align="left", rwidth=0.85, color="#3b6ea8")
    axes.set_xlabel(f"points (of {points(top)})")
    axes.set_ylabel("students")
    axes.yaxis.get_major_locator().set_params(integer=True)
    axes.spines[["top", "right"]].set_visible(False)
    return figure_uri(figure)


def check_figure(items: list[Item]) -> str:
    """Each graded cell's pass rate, in the notebook's order from the top; the cells the item analysis flags
    hatched."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 0.32 * len(items) + 0.8))
    axes = figure.subplots()
    names = [item.cell.column for item in items][::-1]
    rates = [100 * item.difficulty for item in items][::-1]
    colors = ["#b5651d" if item.flag else "#3b6ea8" for item in items][::-1]
    hatches = ["//" if item.flag else "" for item in items][::-1]
    bars = axes.barh(names, rates, color=colors)
    for bar, hatch in zip(bars, hatches):
        bar.set_hatch(hatch)
    for y, rate in enumerate(rates):
        axes.text(min(rate + 1, 101), y, f"{rate:.0f} %", va="center", fontsize=8)
    axes.set_xlim(0, 110)
    axes.set_xlabel("share of the class that passed (hatched: flagged by the item analysis)")
    axes.spines[["top", "right"]].set_visible(False)
    return figure_uri(figure)
