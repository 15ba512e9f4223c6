"""A small synchronous client of the admin API (``/admin``), used by the ``cachegate``
subcommands that manage tenants, keys, policies and the cache from a shell.

Every failure becomes one :class:`AdminError` whose message is what an operator
needs: the API's own error message (the OpenAI-shaped ``error.message``) with the
HTTP status, or why the gateway could not be reached. The admin token is sent
as a bearer header and never appears in a message.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

from gateway.settings import Settings
from gateway.url_redaction import shown

# Hosts a server binds to that a client cannot connect to as such.
_WILDCARD_HOSTS = {"0.0.0.0", "::", "[::]", ""}


class AdminError(Exception):
    """The admin API refused a call, or could not be reached."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def default_admin_url(settings: Settings) -> str:
    """``CACHEGATE_ADMIN_URL``, else the gateway this machine's settings would serve."""
    if settings.admin_url:
        return settings.admin_url.rstrip("/")
    host = "127.0.0.1" if settings.host in _WILDCARD_HOSTS else settings.host
    if ":" in host and not host.startswith("["):  # a bare IPv6 address
        host = f"[{host}]"
    return f"http://{host}:{settings.port}"


def error_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if body.get("detail"):  # a route outside the admin API's error handler
            return str(body["detail"])
    text = response.text.strip()
    return text[:300] if text else response.reason_phrase


def _seg(value: str | int) -> str:
    """One path segment, escaped: a tenant id is a slug, but never trust input."""
    return quote(str(value), safe="")


class AdminClient:
    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._client = httpx.Client(
            base_url=f"{self.url}/admin",
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            transport=transport,
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """One request; the decoded JSON body, or :class:`AdminError`."""
        try:
            r = self._client.request(method, path, json=json, params=params, headers=headers)
        except httpx.HTTPError as exc:
            raise AdminError(f"cannot reach the gateway at {shown(self.url)}: {exc}") from exc
        if r.status_code >= 400:
            raise AdminError(f"{r.status_code}: {error_message(r)}", r.status_code)
        try:
            return r.json()
        except ValueError as exc:
            raise AdminError(
                f"the gateway at {shown(self.url)} answered {r.status_code} without JSON"
            ) from exc

    # ---- tenants ------------------------------------------------------------------
    def list_tenants(self, limit: int = 100, offset: int = 0) -> list[dict[str, Any]]:
        body = self.call("GET", "/tenants", params={"limit": limit, "offset": offset})
        return list(body["data"])

    def create_tenant(
        self, tenant_id: str, name: str | None = None, policy: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"id": tenant_id}
        if name is not None:
            body["name"] = name
        if policy is not None:
            body["policy"] = policy
        return dict(self.call("POST", "/tenants", json=body))

    def set_disabled(self, tenant_id: str, disabled: bool) -> dict[str, Any]:
        action = "disable" if disabled else "enable"
        return dict(self.call("POST", f"/tenants/{_seg(tenant_id)}/{action}"))

    def delete_tenant(self, tenant_id: str) -> dict[str, Any]:
        return dict(self.call("DELETE", f"/tenants/{_seg(tenant_id)}"))

    # ---- keys ---------------------------------------------------------------------
    def issue_key(self, tenant_id: str, name: str = "") -> dict[str, Any]:
        return dict(self.call("POST", f"/tenants/{_seg(tenant_id)}/keys", json={"name": name}))

    def list_keys(self, tenant_id: str) -> list[dict[str, Any]]:
        return list(self.call("GET", f"/tenants/{_seg(tenant_id)}/keys")["data"])

    def revoke_key(self, tenant_id: str, key_id: int) -> dict[str, Any]:
        return dict(self.call("DELETE", f"/tenants/{_seg(tenant_id)}/keys/{_seg(key_id)}"))

    # ---- policy and cache ---------------------------------------------------------
    def get_policy(self, tenant_id: str) -> dict[str, Any]:
        return dict(self.call("GET", f"/tenants/{_seg(tenant_id)}/policy"))

    def patch_policy(
        self, tenant_id: str, changes: dict[str, Any], if_version: int | None = None
    ) -> dict[str, Any]:
        """With ``if_version``, written only if that is still the latest version (412
        otherwise: someone else changed the policy since it was read)."""
        headers = None if if_version is None else {"If-Match": f'"{if_version}"'}
        path = f"/tenants/{_seg(tenant_id)}/policy"
        return dict(self.call("PATCH", path, json=changes, headers=headers))

    def explain(self, tenant_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self.call("POST", f"/tenants/{_seg(tenant_id)}/cache/explain", json=body))
