"""``cachegate doctor``: is this configuration ready to serve, and if not, what to change.

It loads the settings the way ``cachegate serve`` does, checks combinations that run
but hurt (no admin token, a development tenant on a public interface, replicas
without the shared secrets they need), then reaches the database, Redis, the
upstream and the model files (:mod:`gateway.doctor_checks`). Every finding is one
line ``OK | WARN | FAIL``, and a WARN or FAIL says how to fix it. Exit status 1 when
anything FAILs. Secret values are never printed, only whether they are set.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
from dataclasses import asdict
from typing import Any

from pydantic import ValidationError

from gateway.doctor_checks import (
    Check,
    check_database,
    check_models,
    check_redis,
    check_upstream,
)
from gateway.settings import Settings, unknown_setting_names

LOOPBACK = {"127.0.0.1", "localhost", "::1"}
MIN_SECRET_CHARS = 16
NEW_SECRET = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"


def _settings_errors(exc: ValidationError) -> list[Check]:
    found = []
    for err in exc.errors():
        if err["loc"]:
            name = "CACHEGATE_" + "_".join(str(p) for p in err["loc"]).upper()
            found.append(
                Check("config", "FAIL", f"{name}: {err['msg']}", f"correct or unset {name}")
            )
        else:  # a check across settings: its message names them
            found.append(
                Check("config", "FAIL", err["msg"], "correct the setting the message names")
            )
    return found


def check_config(s: Settings) -> list[Check]:
    """Combinations the settings accept but that are unsafe or half-configured."""
    area = "config"
    found = [Check(area, "OK", "settings load")]
    public = s.host not in LOOPBACK
    if s.admin_token is None:
        found.append(
            Check(
                area,
                "WARN",
                "CACHEGATE_ADMIN_TOKEN is unset: the admin API and `cachegate tenants|keys|"
                "policy|cache|report` are off",
                f"set CACHEGATE_ADMIN_TOKEN to a long random value ({NEW_SECRET})",
            )
        )
    elif len(s.admin_token.get_secret_value()) < MIN_SECRET_CHARS:
        found.append(
            Check(
                area,
                "WARN",
                f"CACHEGATE_ADMIN_TOKEN is shorter than {MIN_SECRET_CHARS} characters",
                f"use a long random value ({NEW_SECRET})",
            )
        )
    if public and s.dev_tenant:
        fixed = " with a fixed CACHEGATE_DEV_API_KEY" if s.dev_api_key else ""
        found.append(
            Check(
                area,
                "WARN",
                f"the development tenant {s.dev_tenant!r}{fixed} is served on {s.host}",
                "set CACHEGATE_DEV_TENANT= (empty) outside development and issue keys with "
                "`cachegate keys create`",
            )
        )
    if public and s.metrics_token is None:
        found.append(
            Check(
                area,
                "WARN",
                f"/metrics is open on {s.host}: anyone who reaches the port reads every "
                "tenant's traffic counts"
                + (
                    ", and the upstream prefix-cache hits kept from clients (docs/upstreams.md)"
                    if s.upstream_urls() and s.upstream_cached_tokens != "pass"
                    else ""
                ),
                "set CACHEGATE_METRICS_TOKEN and give Prometheus the same bearer token "
                "(docs/deploy.md)",
            )
        )
    for name, where in unknown_setting_names():
        found.append(
            Check(
                area,
                "WARN",
                f"{name} is set {where} but names no setting: it changes nothing",
                "check its spelling against the README's configuration table (names are "
                "written out in full there)",
            )
        )
    for name, secret in (
        ("CACHEGATE_ENGINE_KEY", s.engine_key),
        ("CACHEGATE_SERVER_SALT", s.server_salt),
        ("CACHEGATE_METRICS_TOKEN", s.metrics_token),
    ):
        if secret is not None and len(secret.get_secret_value()) < MIN_SECRET_CHARS:
            found.append(
                Check(
                    area,
                    "WARN",
                    f"{name} is shorter than {MIN_SECRET_CHARS} characters (a placeholder "
                    "such as change-me left in place?)",
                    f"use a long random value ({NEW_SECRET})",
                )
            )
    if s.upstream_urls() and s.engine_key is None:
        found.append(
            Check(
                area,
                "WARN",
                "HTTP upstream without CACHEGATE_ENGINE_KEY: engines run every tenant in their "
                "default namespace (isolation still holds through cache_salt, but prefix "
                "sharing groups share nothing)",
                "set the same CACHEGATE_ENGINE_KEY on the gateways and `cachegate engine`s",
            )
        )
    if (s.kv_redis_url or s.kv_disk_path) and s.server_salt is None:
        found.append(
            Check(
                area,
                "WARN",
                "an L3 KV tier (CACHEGATE_KV_REDIS_URL / _KV_DISK_PATH) without "
                "CACHEGATE_SERVER_SALT: `cachegate engine` refuses to start (the salt keys "
                "the records' HMAC; the gateway's in-process engine takes the database's)",
                f"set the same long random CACHEGATE_SERVER_SALT on every engine ({NEW_SECRET})",
            )
        )
    if s.embedder == "auto" and s.embedder_path:
        found.append(
            Check(
                area,
                "FAIL",
                "CACHEGATE_EMBEDDER=auto uses the two bundled embedders, but "
                "CACHEGATE_EMBEDDER_PATH names one model",
                "unset CACHEGATE_EMBEDDER_PATH, or choose minilm or e5 for that model",
            )
        )
    if s.eviction_policy not in {"lru", "coverage"}:
        found.append(
            Check(
                area,
                "FAIL",
                f"CACHEGATE_EVICTION_POLICY={s.eviction_policy!r} is not a policy",
                "use lru or coverage",
            )
        )
    else:
        found += _engine_settings(s)
    if s.kv_disk_path is not None:
        found.append(_disk_tier(s))
    if s.otlp_endpoint and importlib.util.find_spec("opentelemetry.sdk") is None:
        found.append(
            Check(
                area,
                "FAIL",
                "CACHEGATE_OTLP_ENDPOINT is set but the OpenTelemetry SDK is not installed: "
                "the gateway and the engine fail at start",
                "pip install 'cachegate[otel]' (the container image has it), or unset "
                "CACHEGATE_OTLP_ENDPOINT",
            )
        )
    return found


def _engine_settings(s: Settings) -> list[Check]:
    """The engine configuration ``serve`` and ``cachegate engine`` build from these
    settings (dtype, device, sizes): what they would refuse at start, refused here."""
    from gateway.app import engine_config
    from prefix.errors import EngineConfigError

    salt = "doctor: the salt is checked above"
    try:
        engine_config(s, salt)
    except EngineConfigError as exc:
        return [
            Check(
                "config",
                "FAIL",
                f"the engine settings are refused: {exc}",
                "correct the CACHEGATE_ setting it names (README's configuration table)",
            )
        ]
    return []


def _disk_tier(s: Settings) -> Check:
    path = s.kv_disk_path
    assert path is not None
    ancestor = path
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if ancestor.is_dir() and os.access(ancestor, os.W_OK):
        return Check("config", "OK", f"KV disk tier at {path} is writable")
    return Check(
        "config",
        "FAIL",
        f"CACHEGATE_KV_DISK_PATH={path} is not a writable directory",
        "point CACHEGATE_KV_DISK_PATH at a writable directory, or unset it",
    )


def diagnose(settings: Settings | None = None) -> list[Check]:
    """Every check, in the order an operator fixes them; settings from the environment
    (``get_settings()``) unless given."""
    if settings is None:
        from gateway.settings import get_settings

        try:
            settings = get_settings()
        except ValidationError as exc:  # nothing else can be checked without settings
            return _settings_errors(exc)
    found = check_config(settings)
    for check in (check_database, check_redis, check_upstream, check_models):
        found += check(settings)
    return found


def format_checks(checks: list[Check]) -> str:
    width = max(len(c.area) for c in checks)
    lines = []
    for c in checks:
        lines.append(f"{c.status:<4}  {c.area:<{width}}  {c.message}")
        if c.fix and c.status != "OK":
            lines.append(f"{'':4}  {'':<{width}}  fix: {c.fix}")
    fails = sum(c.status == "FAIL" for c in checks)
    warns = sum(c.status == "WARN" for c in checks)
    lines.append(f"\n{fails} failure(s), {warns} warning(s)")
    return "\n".join(lines)


def _cmd_doctor(args: argparse.Namespace) -> int:
    checks = diagnose()
    if args.json:
        print(json.dumps([asdict(c) for c in checks], indent=2))
    else:
        print(format_checks(checks))
    return 1 if any(c.status == "FAIL" for c in checks) else 0


def add_doctor_command(sub: Any) -> None:
    doc = sub.add_parser(
        "doctor", help="check configuration, database, Redis, upstream and model files"
    )
    doc.add_argument("--json", action="store_true", help="the checks as a JSON list")
    doc.set_defaults(func=_cmd_doctor)
