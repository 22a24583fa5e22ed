"""The report as a person sees it: opened in a real headless Chromium (Debian's `chromium`,
driven by Playwright pointed at that executable; nothing is downloaded), with a fresh
profile and background networking off. Every request is logged and only `file:` and
`data:` are allowed; the page must load without console errors, draw each plot as SVG
with one mark per bar the manifest holds, and show none of the planted personal data in
its text or attributes (nor hold it in the file, raw or escaped). A screenshot is saved
beside the report.

Under CI=true a missing Chromium or Playwright fails the test: README's test command
installs both.
"""

from __future__ import annotations

import html
import json
import os
import shutil
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import report_marks as marks
from report_planted import PLANTED, built

from curate.report import report

ARGS = ["--disable-background-networking", "--disable-component-update", "--no-first-run"]
ALLOWED = ("file:", "data:")


@pytest.fixture
def planted_versions(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, ...]:
    return built(tmp_path_factory)


def chromium() -> str | None:
    """Debian's browser binary (its /usr/bin/chromium wrapper adds flags from /etc)."""
    for path in ("/usr/lib/chromium/chromium", shutil.which("chromium")):
        if path and os.access(path, os.X_OK):
            return path
    return None


def unavailable(why: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why}: README's test command installs it (apt-get install chromium)")
    pytest.skip(why)


@pytest.fixture
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("playwright is not installed")
    executable = chromium()
    if executable is None:
        unavailable("Debian's chromium is not installed")
    args = ARGS + (["--no-sandbox"] if os.geteuid() == 0 else [])
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=executable, args=args, headless=True)
        try:
            yield launched
        finally:
            launched.close()


def open_page(browser: Any, path: Path) -> tuple[Any, list[str], list[str]]:
    """The page at `path` in a new context (a fresh profile), with every request it made
    and every console error or uncaught exception."""
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    requests: list[str] = []
    errors: list[str] = []

    def route(r: Any) -> None:
        requests.append(r.request.url)
        if r.request.url.startswith(ALLOWED):
            r.continue_()
        else:
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("request", lambda request: requests.append(request.url))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
    page.goto(path.as_uri(), wait_until="load")
    return page, requests, errors


def rendered(page: Any, kind: str, plot: str, series: int) -> int:
    """Marks (or thresholds) of a plot drawn inside its inline SVG, each of a visible size."""
    found: int = page.evaluate(
        """([kind, plot, series]) => {
            const svg = document.getElementById('plot-' + plot);
            if (!svg || svg.namespaceURI !== 'http://www.w3.org/2000/svg') return -1;
            const marks = svg.querySelectorAll(`g[id^="${kind}-${plot}-${series}-"] > path`);
            return Array.from(marks).filter(m => {
                const box = m.getBoundingClientRect();
                return box.height > 0 || box.width > 0;
            }).length;
        }""",
        [kind, plot, series],
    )
    return found


def visible_strings(page: Any) -> str:
    """The page's text as rendered, and every attribute value of every element."""
    text: str = page.evaluate(
        """() => document.body.innerText + '\\n' + Array.from(document.querySelectorAll('*'))
            .flatMap(e => Array.from(e.attributes).map(a => a.value)).join('\\n')"""
    )
    return text


def spellings(value: str) -> set[str]:
    return {
        value,
        json.dumps(value)[1:-1],
        html.escape(value),
        html.escape(value, quote=False),
        urllib.parse.quote(value),
        urllib.parse.quote_plus(value),
        value.lower(),
    }


def check(page_file: Path, browser: Any, versions: list[Any]) -> None:
    raw = page_file.read_text()
    for value in PLANTED:
        for spelled in spellings(value):
            assert spelled not in raw, f"planted value {value!r} is in the file as {spelled!r}"
    bars = {
        k: v for i, version in enumerate(versions) for k, v in marks.expected(version, i).items()
    }
    bars |= marks.expected_tallies(raw, versions)
    histograms = marks.expected_histograms(raw, versions)
    page, requests, errors = open_page(browser, page_file)
    try:
        assert requests and all(url.startswith(ALLOWED) for url in requests), requests
        assert not errors, errors
        assert page.title().startswith("curate report")
        for (plot, series), n in bars.items():
            assert rendered(page, "mark", plot, series) == n, (plot, series)
        for (plot, series), (n, thresholds) in histograms.items():
            assert rendered(page, "mark", plot, series) == n, (plot, series)
            assert rendered(page, "threshold", plot, series) == thresholds, (plot, series)
        shown = visible_strings(page)
        assert "documents after each step" in shown  # the plots' text is rendered text
        for value in PLANTED:
            assert value not in shown and value.lower() not in shown.lower(), value
        if len(versions) == 1:
            open_examples(page, versions[0])
        page.screenshot(path=str(page_file.with_suffix(".png")), full_page=True)
    finally:
        page.context.close()
    assert page_file.with_suffix(".png").stat().st_size > 10_000


def open_examples(page: Any, version: Any) -> None:
    """Each group of examples starts closed; opened by a click on its summary, it shows one
    box per example the version keeps, and still no planted value."""
    rows = version.examples().to_pylist()
    assert rows  # the planted corpus removes documents before and at pii
    groups = page.locator("details.examples")
    expected = {}
    for r in rows:
        expected[(str(r["position"]), r["reason"])] = (
            expected.get((str(r["position"]), r["reason"]), 0) + 1
        )
    assert groups.count() == len(expected)
    for i in range(groups.count()):
        group = groups.nth(i)
        assert group.locator("div.example").first.is_visible() is False
        group.locator("summary").click()
        key = (group.get_attribute("data-stage"), group.get_attribute("data-reason"))
        boxes = group.locator("div.example")
        assert boxes.count() == expected[key], key
        assert all(boxes.nth(k).is_visible() for k in range(boxes.count())), key
    shown = visible_strings(page)
    assert "&lt;" not in shown and "<EMAIL_ADDRESS>" in shown  # the placeholders, as text
    for value in PLANTED:
        assert value not in shown and value.lower() not in shown.lower(), value


def test_report_in_chromium(planted_versions, browser, tmp_path: Path) -> None:
    v1, _ = planted_versions
    check(report(v1).save(tmp_path / "report.html"), browser, [v1])


def test_comparison_in_chromium(planted_versions, browser, tmp_path: Path) -> None:
    v1, v2 = planted_versions
    check(report(v1, v2).save(tmp_path / "compare.html"), browser, [v1, v2])
