"""The report's page: templates/report.html.j2, rendered by Jinja2 with autoescape on. Most of what the page
shows was written or provoked by students (their ids as the LMS sent them, the messages their code raised,
the flags the grader recorded), so every value the template is given is escaped wherever it lands, in text
or in an attribute, and nothing is marked safe: the figures' data URIs are base64, which escaping leaves as
it is. The page loads nothing from elsewhere (its style is templates/report.css, included inline)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from autograder.report.analysis import NEAR_ZERO, Item, Mistake, grading_times, score_summary
from autograder.report.data import ClassData, points

TEMPLATES = Path(__file__).resolve().parent / "templates"
COMMAND = "python -m autograder.report"


def environment() -> Environment:
    """Autoescape on for every template, strict about names the template uses but is not given."""
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["spec"] = format              # {{ x|spec(".4f") }} is f"{x:.4f}"
    env.filters["points"] = points
    return env


def render(data: ClassData, items: list[Item], found: list[Mistake], charts: dict[str, str],
           roster_problems: list[str] | None, exports: dict[str, str]) -> str:
    """The page: `charts` the figures' data URIs, `roster_problems` None when no roster was given."""
    return environment().get_template("report.html.j2").render(
        data=data, items=items, found=found, charts=charts, roster_problems=roster_problems, exports=exports,
        stats=score_summary(data), times=grading_times(data), near_zero=NEAR_ZERO,
        flagged=[result for result in data.results if result.flags], command=COMMAND,
        written=f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M}")
