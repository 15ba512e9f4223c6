"""The HTML report in a real headless Chromium (Debian package ``chromium``), driven
over the DevTools protocol (tests/gateway/cdp.py): it loads from the live
gateway with the admin token, shows the four figures (img elements whose base64
PNG decodes and renders at its natural size), and logs no console error,
uncaught exception, CSP violation or failed load. A deliberately broken page
proves the error collection is not vacuous.

Skipped only when no Chromium is installed (``apt-get install -y chromium``).
"""

from __future__ import annotations

import base64
import io
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gateway.models import RequestStat
from prefix.model.loader import LoadedModel
from tests.gateway.cdp import Browser, chromium_path
from tests.gateway.conftest import Gateway, wait_until
from tests.gateway.scripted_report import ADMIN_TOKEN, scripted_gateway

CHROMIUM = chromium_path()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (apt-get install -y chromium)"
)

FIGURES = ["misfire_vs_threshold", "score_histogram", "hit_rates_over_time", "cache_memory"]
PREFIX = " ".join(f"t{3 + i}" for i in range(40))


@pytest.fixture(scope="module")
def gw(tiny_llama: LoadedModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with scripted_gateway(tiny_llama, tmp_path_factory.mktemp("report-html")) as gateway:
        _tenant, key = gateway.tenant("html")
        with gateway.http(key) as http:  # prompts with a volatile first token: one finding
            for i in range(4):
                body = {"model": gateway.model, "prompt": f"t{90 + i} {PREFIX}", "max_tokens": 1}
                assert http.post("/v1/completions", json=body).status_code == 200
        assert wait_until(lambda: recorded(gateway) == 12 + 4, timeout=10)
        yield gateway


def recorded(gw: Gateway) -> int:
    with Session(gw.app.state.db) as s:
        return int(s.scalar(select(func.count()).select_from(RequestStat)) or 0)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    assert CHROMIUM is not None
    b = Browser(CHROMIUM, tmp_path / "chromium-stderr.txt")
    try:
        yield b
    finally:
        b.close()


def test_report_page_loads_with_figures_and_no_console_errors(
    gw: Gateway, browser: Browser, tmp_path: Path
) -> None:
    page = browser.open_page({"Authorization": f"Bearer {ADMIN_TOKEN}"})
    browser.navigate(page, f"{gw.url}/admin/reports/misfires")
    browser.settle(0.5)

    info = browser.evaluate(
        page,
        """({
          title: document.title,
          ready: document.readyState,
          scripts: document.scripts.length,
          text: document.body.innerText,
          images: Array.from(document.images).map(i => ({
            id: i.id, complete: i.complete, width: i.naturalWidth, height: i.naturalHeight,
            shownWidth: i.getBoundingClientRect().width, src: i.getAttribute('src')
          }))
        })""",
    )
    assert info["ready"] == "complete"
    assert info["title"].startswith("cachegate misfire report")
    assert info["scripts"] == 0
    assert [img["id"] for img in info["images"]] == [f"fig-{name}" for name in FIGURES]
    for img in info["images"]:
        assert img["complete"] and img["shownWidth"] > 100, img["id"]
        assert (img["width"], img["height"]) == (700, 340), img["id"]
        prefix, _, data = img["src"].partition(",")
        assert prefix == "data:image/png;base64" and data
        png = base64.b64decode(data, validate=True)
        assert png.startswith(b"\x89PNG\r\n\x1a\n")
        picture = Image.open(io.BytesIO(png))
        picture.load()
        assert picture.size == (700, 340)
        assert len(picture.convert("L").getcolors(maxcolors=100_000) or []) > 20  # not blank

    text = info["text"]
    for expected in (
        "Semantic hit rate",
        "31.2%",  # 5 semantic hits of 12 scripted + 4 live requests
        "Misfire rate",
        "33.3%",  # 4 of 12 labelled
        "Recommended threshold",
        "Volatile value near the start of the prompt",
        "Per tenant",
        "alpha",
        "beta",
    ):
        assert expected in text, expected
    assert re.search(r"95% Wilson CI \d+\.\d% – \d+\.\d%", text)

    assert browser.problems(page) == []
    shot = base64.b64decode(browser.send("Page.captureScreenshot", {"format": "png"}, page)["data"])
    (tmp_path / "report.png").write_bytes(shot)
    assert Image.open(io.BytesIO(shot)).size[0] > 0


def test_tenant_page_and_the_error_check_itself(gw: Gateway, browser: Browser) -> None:
    page = browser.open_page({"Authorization": f"Bearer {ADMIN_TOKEN}"})
    browser.navigate(page, f"{gw.url}/admin/reports/misfires?tenant=alpha")
    browser.settle(0.3)
    assert browser.evaluate(page, "document.images.length") == 4
    assert "tenant alpha" in browser.evaluate(page, "document.title")
    assert browser.problems(page) == []

    # Without the token the page is an error, and a broken page is reported as broken.
    bare = browser.open_page()
    browser.navigate(bare, f"{gw.url}/admin/reports/misfires")
    assert "invalid_admin_token" in browser.evaluate(bare, "document.body.innerText")
    broken = browser.open_page()
    html = "<p>x</p><script>console.error('boom'); missingFunction();</script>"
    browser.navigate(broken, "data:text/html;base64," + base64.b64encode(html.encode()).decode())
    browser.settle(0.3)
    problems = browser.problems(broken)
    assert any("boom" in p for p in problems) and any("exception" in p for p in problems)
