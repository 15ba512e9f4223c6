"""Settings refused at start: secrets that travel in HTTP headers must be ASCII, and a
refused value (maybe a secret) is never shown in the error."""

from __future__ import annotations

import pydantic
import pytest

from gateway.settings import Settings


@pytest.mark.parametrize("name", ["admin_token", "metrics_token", "engine_key", "upstream_api_key"])
@pytest.mark.parametrize("value", ["pässwörd-long-enough-1234", "two words-long-enough", "tab\tx"])
def test_header_secrets_must_be_ascii_and_are_not_echoed(name: str, value: str) -> None:
    # a non-ASCII admin token was accepted and matched no client's header: 401 for all
    with pytest.raises(pydantic.ValidationError) as info:
        Settings.model_validate({name: value})
    assert f"CACHEGATE_{name.upper()}" in str(info.value)
    assert value not in str(info.value) and "long-enough" not in str(info.value)


def test_ascii_secrets_and_a_refused_url_keep_their_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    token = "abc-DEF_123.x~" + "z" * 20  # control: any printable ASCII token is fine
    assert Settings(admin_token=token).admin_token.get_secret_value() == token  # type: ignore[union-attr]
    with pytest.raises(pydantic.ValidationError) as info:
        Settings(port="s3cret-port")
    assert "s3cret" not in str(info.value)
