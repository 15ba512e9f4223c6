"""The misfire report as JSON, fetched over HTTP with the admin token (shared by
test_reports.py and test_report_stats.py)."""

from __future__ import annotations

from typing import Any

from tests.gateway.conftest import Gateway
from tests.gateway.scripted_report import ADMIN_TOKEN

REPORT = "/admin/reports/misfires"


def report(gw: Gateway, **params: Any) -> dict[str, Any]:
    with gw.http(ADMIN_TOKEN) as http:
        r = http.get(REPORT, params={"format": "json", **params})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/json")
    data: dict[str, Any] = r.json()
    return data
