"""Every page of the site, loaded in Chromium: no errors, nothing fetched from elsewhere, accessible."""

import pytest

from tests.sitecheck import expected_pages, lesson_pages

BLOCKING = ("serious", "critical")


@pytest.mark.parametrize("path", expected_pages())
def test_page_loads_without_console_errors_or_failed_requests(tour, path):
    visit = tour[path]
    assert not visit.console_errors, f"{path}: console errors {visit.console_errors}"
    assert not visit.failed_requests, f"{path}: failed requests {visit.failed_requests}"


@pytest.mark.parametrize("path", expected_pages())
def test_page_fetches_nothing_from_outside_the_site(tour, path):
    """The site works offline (MathJax included): a page that needs a CDN breaks in class and in CI."""
    assert not tour[path].outside_requests, f"{path} requested {tour[path].outside_requests}"


@pytest.mark.parametrize("path", expected_pages())
def test_page_passes_the_accessibility_audit(tour, path):
    """axe-core (WCAG 2 A/AA and best practices) finds no serious or critical violation. Lesser ones are
    listed in _build/test-output/axe-violations.json."""
    blocking = [violation for violation in tour[path].axe_violations if violation["impact"] in BLOCKING]
    assert not blocking, "\n".join(
        f"{path}: {v['impact']} {v['id']}: {v['help']} ({v['url']}) at {v['nodes']}" for v in blocking)


def test_every_lesson_is_photographed_at_desktop_and_phone_widths(tour):
    for path in lesson_pages():
        shots = tour[path].screenshots
        assert len(shots) == 2 and all(shot.stat().st_size > 10_000 for shot in shots), (path, shots)
