"""The limits of one graded submission as nbgrader configuration: `c.Limits.memory_gb = 8` in nbgrader_config.py.

grading_environment.LIMITS declares each limit once (its default, unit, what it bounds and why); this module
makes a trait of each, named after its variable (COURSE_GRADING_MEMORY_GB is `memory_gb`), with that text as
its help, so a course changes a limit where it configures everything else, `--help-all` lists them, and the
grader page renders its table from these traits. The variable of a limit stays what it declares itself to be:
an override for one run, set in the shell, which wins over the configuration.

nbgrader_config.py resolves the limits when it is loaded (in `nbgrader autograde`, in the class grader's
client and in each of its workers, all of which load it) and hands them to grading_environment.use_limits,
where every part of the grader reads them (grading_environment.value), and GuardedExecute gives them to each
sandbox's launcher in its environment: every process of a grading run applies the same numbers.
"""

from __future__ import annotations

from traitlets import Float
from traitlets.config import Configurable

from autograder.grading_environment import LIMITS, PREFIX, Limit, overridden


def trait_name(limit: Limit) -> str:
    return limit.variable.removeprefix(PREFIX).lower()


def trait_help(limit: Limit) -> str:
    unit = f" ({limit.unit})" if limit.unit else ""
    return f"{limit.what}{unit}: {limit.why}. {limit.variable} overrides it for one run."


class LimitSettings(Configurable):
    """What one graded submission may take from the machine (autograder/grading_environment.py's LIMITS)."""

    def configured(self) -> dict[str, float]:
        """Each limit's variable -> its configured value (what grading_environment.use_limits takes)."""
        return {limit.variable: float(getattr(self, trait_name(limit))) for limit in LIMITS}

    def values(self) -> dict[str, float]:
        """Each limit's variable -> the value a run applies: the variable's, when it is set, else the
        configured one."""
        return {variable: overridden(variable, value) for variable, value in self.configured().items()}


# One trait per declared limit (configured as c.Limits.<name>).
Limits = type("Limits", (LimitSettings,), {
    "__doc__": LimitSettings.__doc__,
    **{trait_name(limit): Float(limit.default, help=trait_help(limit)).tag(config=True) for limit in LIMITS},
})


def markdown_table() -> str:
    """The limits as the grader page shows them: what, default, the setting and its variable, why."""
    rows = ["| Limit | Default | Setting (override) | Why this default |", "| --- | --- | --- | --- |"]
    for limit in LIMITS:
        default = f"{limit.default:g} {limit.unit}".strip()
        setting = f"`c.Limits.{trait_name(limit)}` (`{limit.variable}`)"
        rows.append(f"| {limit.what} | {default} | {setting} | {limit.why} |")
    return "\n".join(rows)
