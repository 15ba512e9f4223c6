"""What an HTTP upstream serves: its ``/v1/models`` list, read at start-up, refreshed
every ``models_refresh_seconds``, read again (at most once a second) for a model it
lacks, and the dialect ``auto`` detects from it (``gateway/proxy/dialects.py``).

A mixin of :class:`~gateway.proxy.http_upstream.HttpUpstream`, which owns the HTTP
clients, headers and timeouts it reads through.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import Any

import httpx

from gateway.proxy.dialects import GENERIC, Dialect, detect
from gateway.proxy.upstream_read import parse_json, read_capped
from gateway.url_redaction import shown

log = logging.getLogger("cachegate.gateway.upstream")
LIST_RETRY_SECONDS = 5.0  # a model list that failed is asked for again after this
#: A model the list lacks is looked for again at most this often: a LoRA adapter loaded
#: at run time (vLLM's /v1/load_lora_adapter) is served at once, not after the refresh.
MISSING_REREAD_SECONDS = 1.0
MAX_LIST_BYTES = 4 * 2**20  # a model list is a few KiB; thousands of cards still fit


class ModelListing:
    """The model list and detected dialect of an upstream (see the module)."""

    # Set by the upstream that mixes this in.
    base_url: str
    model: str | None
    configured: Dialect | None
    _headers: dict[str, str]
    _timeout: httpx.Timeout
    _probe_client: httpx.AsyncClient

    def __init__(self, models_refresh_seconds: float) -> None:
        self.detected: Dialect | None = None
        self.models_refresh_seconds = models_refresh_seconds
        self._cards: list[dict[str, Any]] = []
        self._fetched_at: float | None = None
        self._retry_at = 0.0
        self._reread_at = 0.0  # when a model the list lacks may be looked for again
        self._reread: asyncio.Future[None] | None = None  # that read, while in flight
        self._refused_at = -math.inf  # when the listing last answered a 4xx
        self._probe: asyncio.Future[None] | None = None  # the model-list read in flight

    @property
    def dialect(self) -> Dialect:
        return self.configured or self.detected or GENERIC

    def models(self) -> list[str]:
        """The model ids for the gateway's own use (the judge's model, the explainer):
        the listed ones, else the configured name until the list is known. Never shown
        to clients as a card (``list_models``)."""
        ids = [str(c["id"]) for c in self._cards if isinstance(c.get("id"), str)]
        return ids or [self.model or "default"]

    async def list_models(self, expect: str | None = None) -> list[dict[str, Any]] | None:
        """The upstream's cards, or None while its listing has never answered: unknown
        is not a list (the route then neither refuses a model nor invents a card). A
        list once read is kept when a later refresh fails. A model ``expect`` the list
        lacks has it read again first (at most once a second, one read shared by the
        requests that wait for it), before the route refuses the model."""
        now = time.monotonic()
        fresh = (
            self._fetched_at is not None and now - self._fetched_at < self.models_refresh_seconds
        )
        if not fresh and now >= self._retry_at:
            # A failed listing is retried after a pause, not on every request.
            self._retry_at = now + min(LIST_RETRY_SECONDS, self.models_refresh_seconds)
            await self._read_models()
        elif expect is not None and self._fetched_at is not None and not self._lists(expect):
            if (self._reread is None or self._reread.done()) and now >= self._reread_at:
                self._reread_at = now + MISSING_REREAD_SECONDS
                self._reread = asyncio.ensure_future(self._read_models())
            if self._reread is not None and not self._reread.done():
                await asyncio.shield(self._reread)  # one client leaving cancels not the read
        return list(self._cards) if self._fetched_at is not None else None

    def _lists(self, model: str) -> bool:
        return any(card.get("id") == model for card in self._cards)

    async def _read_models(self) -> None:
        try:
            status, raw = await self._get_models(min(self._timeout.read or 5, 5))
        except httpx.HTTPError as exc:
            log.warning("could not list the upstream's models: %r", exc)
        else:
            self._learn(status, raw)

    async def _get_models(self, timeout: float) -> tuple[int, bytes]:
        """``/v1/models``' status and body, the body read up to ``MAX_LIST_BYTES`` (a
        longer one reads as no model list: the listing is trusted with ids, not with
        the gateway's memory)."""
        async with self._probe_client.stream("GET", "/v1/models", timeout=timeout) as r:
            raw, whole = await read_capped(r, MAX_LIST_BYTES)
        return r.status_code, raw if whole else b""

    async def _request_dialect(self) -> Dialect | None:
        """The dialect for one request; None while ``auto`` still does not know it.

        Unknown is not generic: a cachegate engine sent the generic dialect would run
        every tenant in its shared namespace. So each request that finds the dialect
        unknown reads the model list once more itself, past the listing's retry
        pause; concurrent requests share one read in flight.
        """
        if self.configured is not None or self.detected is not None:
            return self.dialect
        if time.monotonic() - self._refused_at < LIST_RETRY_SECONDS:
            return None  # refused a moment ago: asking again per request is wasted
        if self._probe is None or self._probe.done():
            self._probe = asyncio.ensure_future(self._read_models())
        await asyncio.shield(self._probe)
        return self.detected

    def prime(self) -> None:
        """Read the model list once, synchronously (at startup, so the first request and
        the judge already know the models and the dialect). Failing is not fatal."""
        url = f"{self.base_url}/v1/models"
        try:
            with httpx.stream("GET", url, headers=self._headers, timeout=self._timeout) as r:
                parts: list[bytes] = []
                size = 0
                for piece in r.iter_bytes():
                    size += len(piece)
                    if size > MAX_LIST_BYTES:
                        parts = []  # as in _get_models: too long is no model list
                        break
                    parts.append(piece)
        except httpx.HTTPError as exc:
            log.warning("the upstream at %s did not list its models: %s", shown(self.base_url), exc)
            return
        self._learn(r.status_code, b"".join(parts))

    def _learn(self, status: int, raw: bytes) -> None:
        if status != 200:
            log.warning("the upstream's /v1/models answered %s", status)
            if 400 <= status < 500 and status not in (408, 429):
                # Not decisive: a proxy in front of our engine can 403 or 404 during a
                # deploy, and generic would run every tenant in the engine's shared
                # namespace. The dialect stays unknown (fail closed); a strict server
                # shows itself by refusing the salt. Requests stop re-reading a
                # refused listing for a pause.
                self._refused_at = time.monotonic()
            return
        try:
            data = parse_json(raw).get("data")
        except (ValueError, AttributeError):
            data = None
        if not isinstance(data, list):
            log.warning("the upstream's /v1/models is not a model list")
            return
        self._cards = [c for c in data if isinstance(c, dict) and isinstance(c.get("id"), str)]
        self._fetched_at = time.monotonic()
        self.detected = detect(self._cards)

    async def is_ready(self) -> bool:
        try:
            status, raw = await self._get_models(2.0)
        except httpx.HTTPError:
            return False
        self._learn(status, raw)
        return status == 200
