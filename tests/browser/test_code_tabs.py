"""The code tabs (Python, C++, Rust) remember the reader's language from one lesson to the next: sphinx-design
syncs tabs of one `:sync-group:` and keeps the choice in the browser's storage."""

import pytest

from tests.browser.conftest import open_page

pytestmark = pytest.mark.browser

LAYERNORM = "book/01-layernorm.html"
MLP = "book/02-mlp.html"
TAB = "label.sd-tab-label[data-sync-group='language'][data-sync-id='{}']"
SELECTED = """() => [...document.querySelectorAll("label.sd-tab-label[data-sync-group='language']")]
    .filter(label => label.previousElementSibling && label.previousElementSibling.checked)
    .map(label => label.dataset.syncId)"""


def shown_code(page) -> str:
    """The text of the code in the tab-set's visible panel."""
    panel = page.locator(".sd-tab-set .sd-tab-content:visible").first
    return panel.locator("pre").first.inner_text()


def test_choosing_cpp_in_lesson_1_selects_cpp_in_lesson_2(context, base_url):
    page = open_page(context, base_url, LAYERNORM)
    assert page.evaluate(SELECTED) == ["python"], "Python is not the first tab shown"
    assert "def layer_norm(" in shown_code(page)
    page.locator(TAB.format("cpp")).first.scroll_into_view_if_needed()
    page.locator(TAB.format("cpp")).first.click()
    assert page.evaluate(SELECTED) == ["cpp"]
    assert "std::vector<float> layer_norm(" in shown_code(page)
    page.close()

    page = open_page(context, base_url, MLP)
    assert page.locator(TAB.format("cpp")).count() == 1, "lesson 2 has no C++ tab in the language group"
    assert page.evaluate(SELECTED) == ["cpp"], "lesson 2 did not open on the language chosen in lesson 1"
    assert "std::vector<float> gelu_tanh(" in shown_code(page)
    page.close()
