"""A password in an upstream or admin URL is never shown (gateway/url_redaction.py):
not in the start-up warning, doctor's checks or the admin CLI's errors, which printed
it in clear (a review, session 41)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.admin_client import AdminClient, AdminError
from gateway.doctor_checks import check_upstream
from gateway.url_redaction import shown
from tests.gateway.conftest import gateway_settings

SECRET = "hunter2-zqx"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (f"http://ops:{SECRET}@127.0.0.1:9/v1", "http://ops:***@127.0.0.1:9/v1"),
        (f"https://:{SECRET}@gw.example", "https://:***@gw.example"),
        (f"http://u:{SECRET}@[::1]:8000", "http://u:***@[::1]:8000"),
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),  # nothing to hide
        ("http://ops@host:8000", "http://ops@host:8000"),  # a user alone is no secret
        (f"http://u:{SECRET}@host:port/", "***@host:port/"),  # unparsable port
    ],
)
def test_a_urls_password_is_never_shown(url: str, expected: str) -> None:
    assert shown(url) == expected


def test_doctor_and_the_admin_cli_hide_a_urls_password(tmp_path: Path) -> None:
    down = f"http://ops:{SECRET}@127.0.0.1:9"
    s = gateway_settings(tmp_path, upstream_url=down)
    [check] = check_upstream(s)
    assert check.status == "FAIL" and "ops:***@127.0.0.1:9" in check.message
    assert SECRET not in check.message + (check.fix or "")
    with pytest.raises(AdminError) as caught:
        AdminClient(down, "token", timeout=2).call("GET", "/tenants")
    assert SECRET not in str(caught.value) and "ops:***@" in str(caught.value)
