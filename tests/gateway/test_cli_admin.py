"""``cachegate tenants|keys|policy|cache`` against a live gateway's admin API (the tiny
random Llama and the real embedder, an admin token). Every subcommand is checked by
its effect on the gateway (a disabled tenant's key gets 403, a revoked key 401, a
policy change is the next version), in table form and as ``--json``; API errors and
a wrong token print the API's message and exit non-zero without a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.cli import main
from gateway.settings import get_settings
from prefix.model.loader import LoadedModel
from semantic import Embedder
from tests.gateway.admin_support import (
    ADMIN_TOKEN,
    CAPITAL,
    CAPITAL_PARAPHRASE,
    SEND_100,
    SEND_900,
    admin_gateway,
    seed,
)
from tests.gateway.conftest import Gateway


@pytest.fixture(scope="module")
def gw(
    tiny_llama: LoadedModel, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    with admin_gateway(tmp_path_factory.mktemp("cli-admin"), tiny_llama, embedder) as g:
        yield g


class Cli:
    """Runs ``cachegate`` in this process against the gateway, flags passed explicitly."""

    def __init__(self, gw: Gateway, capsys: pytest.CaptureFixture[str]) -> None:
        self.gw, self.capsys = gw, capsys

    def __call__(self, *args: str, token: str = ADMIN_TOKEN) -> tuple[int, str, str]:
        self.capsys.readouterr()
        rc = main([*args, "--url", self.gw.url, "--token", token])
        out, err = self.capsys.readouterr()
        return rc, out, err

    def ok(self, *args: str) -> str:
        rc, out, err = self(*args)
        assert rc == 0, err
        return out

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--json"))


@pytest.fixture
def cli(gw: Gateway, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(gw, capsys)


def status(gw: Gateway, key: str) -> int:
    with gw.http(key) as http:
        return http.get("/v1/models").status_code


def test_tenants_create_list_disable_enable_delete(gw: Gateway, cli: Cli) -> None:
    out = cli.ok("tenants", "create", "cli-acme", "--name", "Acme Corp")
    assert out.splitlines()[0].split()[:2] == ["id", "name"]  # a table with its header
    assert "cli-acme" in out and "Acme Corp" in out
    rows = cli.json("tenants", "list")
    (acme,) = [r for r in rows if r["id"] == "cli-acme"]
    assert acme["disabled"] is False and acme["active_keys"] == 0
    assert "cli-acme" in cli.ok("tenants", "list")

    key = cli.json("keys", "create", "cli-acme")["key"]
    assert status(gw, key) == 200
    assert cli.json("tenants", "disable", "cli-acme")["disabled"] is True
    assert status(gw, key) == 403
    assert cli.json("tenants", "enable", "cli-acme")["disabled"] is False
    assert status(gw, key) == 200

    rc, _, err = cli("tenants", "delete", "cli-acme")  # no --yes: refused, nothing deleted
    assert rc == 2 and "--yes" in err
    assert status(gw, key) == 200
    out = cli.ok("tenants", "delete", "cli-acme", "--yes")
    assert "deleted tenant cli-acme: 1 key(s)" in out
    assert status(gw, key) == 401
    assert all(r["id"] != "cli-acme" for r in cli.json("tenants", "list"))


def test_keys_create_list_revoke(gw: Gateway, cli: Cli) -> None:
    cli.ok("tenants", "create", "cli-keys")
    out = cli.ok("keys", "create", "cli-keys", "--name", "ci")
    assert "shown once" in out
    key = out.strip().splitlines()[-1]
    assert status(gw, key) == 200  # the printed line is the working key

    listing = cli.ok("keys", "list", "cli-keys")
    assert "ci" in listing and key[:10] in listing
    assert key not in listing  # a listing shows the prefix, never the key
    (row,) = cli.json("keys", "list", "cli-keys")
    assert row["name"] == "ci" and row["revoked_at"] is None and "key" not in row

    revoked = cli.json("keys", "revoke", "cli-keys", str(row["id"]))
    assert revoked["id"] == row["id"] and revoked["revoked_at"] is not None
    assert status(gw, key) == 401


def test_policy_get_and_set_with_pairs_and_a_file(cli: Cli, tmp_path: Path) -> None:
    cli.ok("tenants", "create", "cli-pol")
    before = cli.json("policy", "get", "cli-pol")
    assert before["version"] == 0 and before["policy"]["threshold"] == 0.89
    assert "defaults apply" in cli.ok("policy", "get", "cli-pol")

    after = cli.json("policy", "set", "cli-pol", "threshold=0.93", "semantic_enabled=false")
    assert after["version"] == 1
    assert after["policy"]["threshold"] == 0.93 and after["policy"]["semantic_enabled"] is False

    changes = tmp_path / "policy.json"
    changes.write_text(json.dumps({"semantic_enabled": True, "max_temperature": 0.5}))
    out = cli.ok("policy", "set", "cli-pol", "--file", str(changes))
    assert "policy version 2" in out
    now = cli.json("policy", "get", "cli-pol")["policy"]
    # PATCH semantics: the file's fields changed, the earlier threshold was kept
    assert now["threshold"] == 0.93 and now["semantic_enabled"] is True
    assert now["max_temperature"] == 0.5

    # --if-version: written over the version read, refused over a stale one.
    rc, _, err = cli("policy", "set", "cli-pol", "threshold=0.9", "--if-version", "1")
    assert rc == 1 and err.startswith("error: 412: ")
    assert cli.json("policy", "get", "cli-pol")["version"] == 2  # nothing was written
    out = cli.ok("policy", "set", "cli-pol", "threshold=0.9", "--if-version", "2")
    assert "policy version 3" in out


def test_policy_errors_print_the_api_message(cli: Cli) -> None:
    cli.ok("tenants", "create", "cli-bad")
    rc, out, err = cli("policy", "set", "cli-bad", "threshold=2")
    assert rc == 1 and out == ""
    assert err.startswith("error: 400: ") and "threshold" in err
    assert "Traceback" not in err
    assert cli.json("policy", "get", "cli-bad")["version"] == 0  # nothing was stored

    # a list written as the shell would: the 400 says how the CLI reads values (it
    # said only "Input should be a valid list": session 45's review)
    rc, _, err = cli("policy", "set", "cli-bad", "guards=time_sensitive,high_risk")
    assert rc == 1 and "reads each value as JSON" in err and 'guards=["high_risk"]' in err
    rc, _, err = cli("policy", "set", "cli-bad", 'guards=["high_risk"]')
    assert rc == 0, err  # the control
    rc, _, err = cli("policy", "set", "cli-bad", "not-a-pair")
    assert rc == 2 and "key=value" in err
    rc, _, err = cli("tenants", "disable", "no-such-tenant")
    assert rc == 1 and err.startswith("error: 404: ")
    rc, _, err = cli("tenants", "create", "cli-bad")
    assert rc == 1 and err.startswith("error: 409: ")


def test_cache_explain_hit_and_entity_miss(gw: Gateway, cli: Cli) -> None:
    cli.ok("tenants", "create", "cli-why")
    # explain "question" asks as a chat body with one user message and the served model
    for question in (CAPITAL, SEND_100):
        seed(
            gw, "cli-why", {"model": gw.model, "messages": [{"role": "user", "content": question}]}
        )

    hit = cli.json("cache", "explain", CAPITAL_PARAPHRASE, "--tenant", "cli-why")
    assert hit["decision"] == "hit" and hit["would_hit"] is True
    assert hit["candidates"][0]["question"] == CAPITAL
    text = cli.ok("cache", "explain", CAPITAL_PARAPHRASE, "--tenant", "cli-why")
    assert text.startswith("tenant cli-why, policy version 0: hit; would hit: yes")
    assert CAPITAL in text

    miss = cli.json("cache", "explain", SEND_900, "--tenant", "cli-why")
    assert miss["would_hit"] is False and "entity_mismatch" in (miss["reason"] or "")
    text = cli.ok("cache", "explain", SEND_900, "--tenant", "cli-why")
    assert "would hit: no" in text and "FAIL" in text and "entities:" in text


def test_cache_explain_takes_the_request_body(gw: Gateway, cli: Cli, tmp_path: Path) -> None:
    """The sampling parameters key the partition: a question alone (default
    parameters) missed what a client with max_tokens and temperature stored; --body
    explains that client's request (session 45's review)."""
    cli.ok("tenants", "create", "cli-body")
    body: dict[str, Any] = {"model": gw.model, "messages": [{"role": "user", "content": CAPITAL}]}
    body |= {"max_tokens": 300, "temperature": 0}
    seed(gw, "cli-body", body)
    alone = cli.json("cache", "explain", CAPITAL, "--tenant", "cli-body")
    assert alone["would_hit"] is False and alone["partition_size"] == 0  # the control
    path = tmp_path / "body.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    hit = cli.json("cache", "explain", "--body", str(path), "--tenant", "cli-body")
    assert hit["would_hit"] is True and hit["partition_size"] == 1
    rc, _, err = cli("cache", "explain", "--tenant", "cli-body")
    assert rc == 2 and "give a question, or --body" in err


def test_a_stored_questions_escape_sequences_are_shown_not_obeyed(gw: Gateway, cli: Cli) -> None:
    # A tenant's user wrote a question with terminal escape sequences (a window title,
    # hidden text) and a right-to-left override; a backfill stored it as sent. The
    # operator's table shows them escaped (before session 43 they reached the terminal).
    cli.ok("tenants", "create", "cli-esc")
    question = "What is the capital of France?\x1b]0;t\x07\x1b[8m\u202e!"  # cells: 60 chars
    seed(gw, "cli-esc", {"model": gw.model, "messages": [{"role": "user", "content": question}]})
    raw = cli.json("cache", "explain", CAPITAL, "--tenant", "cli-esc")
    assert raw["candidates"][0]["question"] == question  # the API's data is untouched
    text = cli.ok("cache", "explain", CAPITAL, "--tenant", "cli-esc")
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "France?\\x1b]0;t\\x07\\x1b[8m\\u202e!" in text


def test_env_settings_and_a_wrong_token(
    gw: Gateway, cli: Cli, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rc, out, err = cli("tenants", "list", token="wrong-token-0123456789")
    assert rc == 1 and out == "" and err.startswith("error: 401: ")
    assert "wrong-token" not in err and "Traceback" not in err

    # URL and token from CACHEGATE_ADMIN_URL / CACHEGATE_ADMIN_TOKEN through the settings
    monkeypatch.setenv("CACHEGATE_ADMIN_URL", gw.url)
    monkeypatch.setenv("CACHEGATE_ADMIN_TOKEN", ADMIN_TOKEN)
    get_settings.cache_clear()
    try:
        cli.ok("tenants", "create", "cli-env")
        capsys.readouterr()
        assert main(["tenants", "list", "--json"]) == 0
        assert "cli-env" in {r["id"] for r in json.loads(capsys.readouterr().out)}
        monkeypatch.delenv("CACHEGATE_ADMIN_TOKEN")
        get_settings.cache_clear()
        assert main(["tenants", "list"]) == 2
        assert "CACHEGATE_ADMIN_TOKEN" in capsys.readouterr().err
    finally:
        get_settings.cache_clear()


def test_console_script_reports_errors_cleanly(gw: Gateway, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CACHEGATE_")}
    env |= {"CACHEGATE_ADMIN_URL": gw.url, "CACHEGATE_ADMIN_TOKEN": "not-the-token-000000"}
    cmd = [sys.executable, "-m", "gateway.cli", "keys", "list", "dev"]
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert run.returncode == 1, run
    assert run.stderr.startswith("error: 401: ") and "Traceback" not in run.stderr
    assert "not-the-token" not in run.stderr

    unreachable = env | {"CACHEGATE_ADMIN_URL": "http://127.0.0.1:9"}
    run = subprocess.run(
        cmd, capture_output=True, text=True, env=unreachable, cwd=tmp_path, timeout=120
    )
    assert run.returncode == 1 and "cannot reach the gateway at http://127.0.0.1:9" in run.stderr


def test_version_of_the_installed_console_script() -> None:
    from importlib.metadata import version

    script = Path(sys.executable).parent / "cachegate"
    run = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run
    assert run.stdout.strip() == f"cachegate {version('cachegate')}"


@pytest.fixture(scope="module")
def not_cachegate() -> Iterator[str]:
    """Another service at the admin URL: 200 and an empty JSON object to everything."""
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    from tests.live_server import serving

    app = FastAPI()

    @app.api_route("/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
    async def anything(path: str) -> JSONResponse:
        return JSONResponse({})

    with serving(app) as url:
        yield url


@pytest.mark.parametrize(
    "argv",
    [
        ["tenants", "list"],
        ["tenants", "create", "zz"],
        ["keys", "create", "zz"],
        ["policy", "get", "zz"],
        ["report"],
    ],
)
def test_another_services_answer_is_an_error_not_a_traceback(
    not_cachegate: str, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # tracebacks (KeyError) before; `tenants create` printed dashes and exited 0
    assert main([*argv, "--url", not_cachegate, "--token", "t"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err, err


def test_a_malformed_url_and_a_deep_file_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["tenants", "list", "--url", "http://[::1", "--token", "t"]) == 2
    assert main(["report", "--url", "http://[::1", "--token", "t"]) == 1
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    url = "http://127.0.0.1:9"  # never reached: the file is read first
    assert main(["policy", "set", "zz", "--file", str(deep), "--url", url, "--token", "t"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("error: ") == 3, err
