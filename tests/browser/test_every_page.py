"""Every page of the site, loaded in Chromium: no errors, nothing fetched from elsewhere, accessible."""

import pytest

from tests.browser.conftest import take_tour
from tests.sitecheck import expected_pages, lesson_pages, redirects

# The tour of every page is taken by the background thread as soon as the site is built (tests/conftest.py).
pytestmark = [pytest.mark.browser, pytest.mark.after_site.with_args(take_tour)]

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


@pytest.mark.parametrize("path", lesson_pages())
def test_no_code_block_of_a_lesson_overflows_at_1280_px(tour, path):
    """Every line of code in a lesson can be read at 1280 px without scrolling sideways."""
    wide = tour[path].overflowing_code
    assert not wide, f"{path}: {len(wide)} code blocks scroll sideways at 1280 px; their longest lines:\n" + \
        "\n".join(wide)


@pytest.mark.parametrize("path", lesson_pages())
def test_every_diagram_loads_and_fits_at_desktop_and_phone_widths(tour, path):
    """Each diagram decodes (no broken image), has a non-zero size and alt text, stays inside the article
    at 1280 px and at 390 px, and on a phone is drawn at least 0.6 times its natural size (its smallest
    text, 13 px, stays about 8 px or larger)."""
    for width, diagrams in tour[path].diagrams.items():
        for diagram in diagrams:
            where = f"{path} at {width}: {diagram['src']}"
            assert diagram["decoded"] and diagram["naturalWidth"] > 0 and diagram["naturalHeight"] > 0, where
            assert diagram["width"] > 0 and diagram["height"] > 0, where
            assert diagram["alt"].strip(), where
            assert diagram["articleLeft"] - 1 <= diagram["left"] and diagram["right"] <= diagram["articleRight"] + 1, where
            assert diagram["right"] <= diagram["viewport"], where
            if width == "phone":
                assert diagram["width"] >= 0.6 * diagram["naturalWidth"], (where, diagram["width"])


def test_every_lesson_shows_a_diagram(tour):
    assert lesson_pages(), "the site map lists no lesson"
    for path in lesson_pages():
        assert tour[path].diagrams["desktop"], f"{path} shows no diagram"


@pytest.mark.parametrize("old", sorted(redirects()))
def test_old_lesson_address_forwards_to_the_renumbered_lesson(context, base_url, old):
    """Links into the numbering before lesson 3 (attention) was added still arrive, section included."""
    page = context.new_page()
    page.goto(base_url + old + "#further-reading", wait_until="load")
    page.wait_for_url(base_url + redirects()[old] + "#further-reading")
    assert page.locator("article h1").count() == 1
    page.close()
