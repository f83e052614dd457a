"""The site as students use it: served over HTTP on 127.0.0.1 and driven in headless Chromium.

Playwright for Python drives Debian's Chromium in its headless build (`/usr/bin/chromium-headless-shell`,
package chromium-headless-shell, installed by `make test`; never a browser that Playwright downloads). It is
the same Blink as the `chromium` package, without the desktop browser around it, and what Playwright itself
runs for headless tests: the tour of every page below took 86 s and 115 CPU-s with it, 122 s and 183 CPU-s
with the full browser's headless mode, with the same findings. Every page is visited once per run, by the session fixture `tour`,
which records what went wrong on it, runs the axe-core accessibility audit and writes screenshots;
the tests then read that record, and a few tests drive a page themselves.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.conftest import after_site_result
from tests.sitecheck import TEST_OUTPUT, expected_pages, lesson_pages
from tools.course import COURSE

CHROMIUM = Path("/usr/bin/chromium-headless-shell")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
AXE = COURSE.root / "node_modules" / "axe-core" / "axe.min.js"
SCREENSHOTS = TEST_OUTPUT / "screenshots"
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, ".ipynb": "application/x-ipynb+json"}

    def log_message(self, format, *args):
        pass


@contextlib.contextmanager
def served(site: Path):
    """The built site, served on a free port of 127.0.0.1: its URL."""
    handler = lambda *args, **kwargs: QuietHandler(*args, directory=str(site), **kwargs)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def chromium():
    """Debian's Chromium, driven by Playwright from the calling thread (each thread needs its own)."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs it (apt-get install chromium-headless-shell)")
    if not AXE.exists():
        pytest.fail("node_modules/axe-core is missing: run `npm ci` (`make test` does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="session")
def base_url(site):
    """The built site, served for the whole run."""
    with served(site) as url:
        yield url


@pytest.fixture(scope="session")
def browser():
    with chromium() as browser:
        yield browser


@dataclass
class Visit:
    """What happened while one page loaded."""

    console_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)     # local requests that failed or got >= 400
    outside_requests: list[str] = field(default_factory=list)    # requests that tried to leave the site
    axe_violations: list[dict] = field(default_factory=list)
    screenshots: list[Path] = field(default_factory=list)
    overflowing_code: list[str] = field(default_factory=list)   # code blocks wider than their box at 1280 px
    diagrams: dict[str, list[dict]] = field(default_factory=dict)  # width name -> each diagram as drawn


# Code blocks of the lesson (cell inputs, their printed output and code in the prose) whose text is
# wider than the box that shows it: each one would need a horizontal scroll bar to read.
OVERFLOWING_CODE = """() => [...document.querySelectorAll("article pre")]
    .filter(pre => pre.scrollWidth > pre.clientWidth + 1)
    .map(pre => pre.textContent.split("\\n").reduce((a, b) => (b.length > a.length ? b : a), "").slice(0, 150))"""

# Every diagram (book/_static/diagrams/*.svg) once decoded: its natural and drawn sizes, its alt text,
# and the width of the article it sits in.
DIAGRAMS = """async () => {
    const images = [...document.querySelectorAll("article img.diagram")];
    return Promise.all(images.map(async img => {
        let decoded = true;
        try { await img.decode(); } catch (error) { decoded = false; }
        const box = img.getBoundingClientRect();
        const article = img.closest("article").getBoundingClientRect();
        return {src: img.getAttribute("src"), alt: img.alt, decoded, naturalWidth: img.naturalWidth,
                naturalHeight: img.naturalHeight, width: box.width, height: box.height,
                left: box.left, right: box.right, articleLeft: article.left, articleRight: article.right,
                viewport: window.innerWidth};
    }));
}"""


def new_context(browser, base_url, **options):
    """A browser context in which any request that leaves the local server is blocked and recorded."""
    context = browser.new_context(viewport=DESKTOP, accept_downloads=True, **options)
    context.outside_requests = []
    host = urlsplit(base_url).netloc

    def route(route):
        url = urlsplit(route.request.url)
        if url.scheme in ("http", "https") and url.netloc != host:
            context.outside_requests.append(route.request.url)
            route.abort()
        else:
            route.continue_()

    context.route("**/*", route)
    return context


def open_page(context, base_url: str, path: str, visit: Visit | None = None):
    """Load a page, wait for MathJax to finish typesetting, and record errors into `visit`."""
    visit = visit if visit is not None else Visit()
    page = context.new_page()
    page.on("console", lambda message: visit.console_errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: visit.console_errors.append(str(error)))
    page.on("requestfailed", lambda request: visit.failed_requests.append(f"{request.url} ({request.failure})")
            if request.url.startswith(base_url) else None)
    page.on("response", lambda response: visit.failed_requests.append(f"{response.url} (HTTP {response.status})")
            if response.status >= 400 else None)
    page.goto(base_url + path, wait_until="load")
    page.evaluate("() => window.MathJax && MathJax.startup ? MathJax.startup.promise : null")
    return page


def audit(page) -> list[dict]:
    """Run axe-core (the npm package) in the page; every violation with its impact and first nodes."""
    page.add_script_tag(path=str(AXE))
    return page.evaluate("""async () => {
        const result = await axe.run(document, {resultTypes: ["violations"]});
        return result.violations.map(v => ({id: v.id, impact: v.impact, help: v.help, url: v.helpUrl,
            nodes: v.nodes.slice(0, 5).map(n => n.target.join(" "))}));
    }""")


def screenshot_name(path: str, width: str) -> Path:
    return SCREENSHOTS / f"{path.removesuffix('.html').replace('/', '--')}--{width}.jpg"


def take_tour(site: Path) -> dict[str, "Visit"]:
    """Every page of the site visited once, in a browser and on a server of its own (the background thread
    takes the tour as soon as the site is built: tests/conftest.py)."""
    with served(site) as base_url, chromium() as browser:
        return visit_every_page(browser, base_url)


@pytest.fixture(scope="session")
def tour(site, request) -> dict[str, Visit]:
    """Every page's visit: the tests that read it carry `pytest.mark.after_site.with_args(take_tour)`."""
    return after_site_result(request.config, take_tour, site)


def visit_every_page(browser, base_url: str) -> dict[str, Visit]:
    """Every page of the site visited once: errors recorded, audited, and each lesson photographed at
    desktop and phone widths into _build/test-output/screenshots/ (git-ignored) for review."""
    shutil.rmtree(SCREENSHOTS, ignore_errors=True)        # only this run's pictures
    SCREENSHOTS.mkdir(parents=True)
    context = new_context(browser, base_url)
    visits = {}
    for path in expected_pages():
        visit = Visit()
        page = open_page(context, base_url, path, visit)
        # Audit at the width the page loaded at, before the phone-width screenshot reflows it.
        visit.axe_violations = audit(page)
        if path in lesson_pages():
            visit.overflowing_code = page.evaluate(OVERFLOWING_CODE)
            for name, size in (("desktop", DESKTOP), ("phone", PHONE)):
                page.set_viewport_size(size)
                visit.diagrams[name] = page.evaluate(DIAGRAMS)
                # JPEG: a full lesson is a tall image, and PNG takes seconds to encode.
                page.screenshot(path=screenshot_name(path, name), full_page=True, type="jpeg", quality=80)
                visit.screenshots.append(screenshot_name(path, name))
            page.set_viewport_size(DESKTOP)
        visit.outside_requests = list(context.outside_requests)
        context.outside_requests.clear()
        page.close()
        visits[path] = visit
    context.close()
    report = {path: visit.axe_violations for path, visit in visits.items()}
    (TEST_OUTPUT / "axe-violations.json").write_text(json.dumps(report, indent=1) + "\n")
    return visits


@pytest.fixture()
def context(browser, base_url):
    """A fresh browser context for a test that drives a page itself."""
    context = new_context(browser, base_url)
    yield context
    context.close()
