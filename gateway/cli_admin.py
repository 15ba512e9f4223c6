"""``cachegate tenants|keys|policy|cache``: the admin API from a shell.

Each subcommand is one admin call (:mod:`gateway.admin_client`) printed as a table,
or with ``--json`` as the API's own JSON. The gateway URL and admin token come from
``--url`` / ``--token`` or ``CACHEGATE_ADMIN_URL`` / ``CACHEGATE_ADMIN_TOKEN`` (read
through :func:`gateway.settings.get_settings`). An API error prints the API's
message and exits 1; a missing token or a bad argument exits 2; never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from gateway.admin_client import AdminClient, AdminError, default_admin_url
from gateway.cli_output import cell, fields, table

# A handler makes its calls and returns (data for --json, text for the table form).
Handler = Callable[[AdminClient, argparse.Namespace], tuple[Any, str]]


class UsageError(Exception):
    """A bad argument noticed before any call (exit 2, like argparse's own)."""


def _client(args: argparse.Namespace) -> AdminClient:
    from gateway.settings import get_settings

    s = get_settings()
    token = args.token or (s.admin_token.get_secret_value() if s.admin_token else None)
    if not token:
        raise UsageError("no admin token: pass --token or set CACHEGATE_ADMIN_TOKEN")
    url = args.url or default_admin_url(s)
    try:
        return AdminClient(url, token)
    except httpx.InvalidURL as exc:  # not an HTTPError: it escaped as a traceback
        raise UsageError(f"invalid gateway URL {url!r}: {exc}") from exc


def _runner(handler: Handler) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            with _client(args) as client:
                data, text = handler(client, args)
        except UsageError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except AdminError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        except (KeyError, TypeError, AttributeError, IndexError):
            # 200 with JSON of another shape: a proxy or another service at that URL
            where = args.url or "CACHEGATE_ADMIN_URL"
            print(
                f"error: the answer from {where} is not a cachegate admin API's "
                "(wrong URL, or a proxy in between?)",
                file=sys.stderr,
            )
            return 1
        print(json.dumps(data, indent=2, ensure_ascii=False) if args.json else text)
        return 0

    return run


# ---- tenants ---------------------------------------------------------------------------
TENANT_COLUMNS = ("id", "name", "disabled", "policy_version", "active_keys", "created_at")


def _tenant_table(rows: Sequence[dict[str, Any]]) -> str:
    return table(TENANT_COLUMNS, [[r.get(c) for c in TENANT_COLUMNS] for r in rows])


def _tenants_list(c: AdminClient, a: argparse.Namespace) -> tuple[Any, str]:
    rows = c.list_tenants(limit=a.limit, offset=a.offset)
    return rows, _tenant_table(rows)


def _tenant_row(row: Any) -> dict[str, Any]:
    """A tenant as the admin API returns it; anything else is another service's answer
    (a KeyError, which the runner reports: it printed a table of dashes and exited 0)."""
    if not isinstance(row, dict) or "id" not in row:
        raise KeyError("id")
    return row


def _tenants_create(c: AdminClient, a: argparse.Namespace) -> tuple[Any, str]:
    policy = _json_object(a.policy) if a.policy else None
    row = _tenant_row(c.create_tenant(a.tenant, name=a.name, policy=policy))
    return row, _tenant_table([row])


def _tenants_disable(c: AdminClient, a: argparse.Namespace) -> tuple[Any, str]:
    row = _tenant_row(c.set_disabled(a.tenant, True))
    return row, _tenant_table([row])


def _tenants_enable(c: AdminClient, a: argparse.Namespace) -> tuple[Any, str]:
    row = _tenant_row(c.set_disabled(a.tenant, False))
    return row, _tenant_table([row])


def _tenants_delete(c: AdminClient, a: argparse.Namespace) -> tuple[Any, str]:
    # Deleting removes keys, policies, samples, stats and cache entries: ask for intent.
    if not a.yes:
        raise UsageError(f"deleting tenant {a.tenant!r} removes all its data: add --yes")
    out = c.delete_tenant(a.tenant)
    text = (
        f"deleted tenant {out['id']}: {out['keys_removed']} key(s), "
        f"{out['policy_versions_removed']} policy version(s), "
        f"{out['semantic_entries_removed']} cache entr(y/ies) removed"
    )
    return out, text


# ---- keys ------------------------------------------------------------------------------
KEY_COLUMNS = ("id", "tenant_id", "name", "prefix", "created_at", "revoked_at")


def _keys_create(c: AdminClient, a: argparse.Namespace) -> tuple[Any, str]:
    out = c.issue_key(a.tenant, a.name)
    # The one place a secret is printed: the API returns the raw key this once only.
    text = f"key {out['id']} of tenant {out['tenant_id']} (shown once, store it now):\n{out['key']}"
    return out, text


def _keys_list(c: AdminClient, a: argparse.Namespace) -> tuple[Any, str]:
    rows = c.list_keys(a.tenant)
    return rows, table(KEY_COLUMNS, [[r.get(k) for k in KEY_COLUMNS] for r in rows])


def _keys_revoke(c: AdminClient, a: argparse.Namespace) -> tuple[Any, str]:
    row = c.revoke_key(a.tenant, a.key_id)
    return row, table(KEY_COLUMNS, [[row.get(k) for k in KEY_COLUMNS]])


# ---- policy ----------------------------------------------------------------------------
def _policy_text(out: dict[str, Any]) -> str:
    who = f", by {out['created_by']} at {out['created_at']}" if out.get("created_by") else ""
    head = f"tenant {out['tenant_id']}, policy version {out['version']}{who}"
    if out["version"] == 0:
        head += " (no policy stored: the defaults apply)"
    return head + "\n" + fields(out["policy"])


def _policy_get(c: AdminClient, a: argparse.Namespace) -> tuple[Any, str]:
    out = c.get_policy(a.tenant)
    return out, _policy_text(out)


def _json_object(path: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from exc
    except ValueError as exc:
        raise UsageError(f"{path} is not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise UsageError(f"{path} is nested too deeply") from exc
    if not isinstance(data, dict):
        raise UsageError(f"{path} must hold a JSON object of policy fields")
    return data


def parse_assignments(pairs: Sequence[str]) -> dict[str, Any]:
    """``key=value`` pairs: a value that parses as JSON is taken as such (numbers,
    true/false, null, lists), anything else as a plain string (``mode=allowlist``)."""
    changes: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"expected key=value, got {pair!r}")
        if key in changes:
            raise UsageError(f"{key!r} is given twice")
        try:
            changes[key] = json.loads(raw)
        except ValueError:
            changes[key] = raw
    return changes


def _policy_set(c: AdminClient, a: argparse.Namespace) -> tuple[Any, str]:
    changes = _json_object(a.file) if a.file else {}
    changes |= parse_assignments(a.changes)  # pairs override the file's fields
    if not changes:
        raise UsageError("nothing to change: give key=value pairs or --file FILE")
    try:
        out = c.patch_policy(a.tenant, changes, if_version=a.if_version)
    except AdminError as err:
        if err.status == 400 and a.changes:  # "guards=a,b" said only "a valid list"
            raise AdminError(f"{err} ({_JSON_HINT})", err.status) from None
        raise
    return out, _policy_text(out)


_JSON_HINT = (
    "key=value reads each value as JSON: write a list as 'guards=[\"high_risk\"]' and a "
    "string that reads as a number as 'prefix_namespace=\"2024\"'"
)


# ---- cache explain ---------------------------------------------------------------------
def _explain_text(out: dict[str, Any]) -> str:
    verdict = out["decision"] + (f" ({out['reason']})" if out.get("reason") else "")
    part = out.get("partition_key") or "-"
    best = out["best_score"] if out["best_score"] is not None else "-"
    steps = [[s["check"], "pass" if s["passed"] else "FAIL", s.get("detail")] for s in out["steps"]]
    lines = [
        f"tenant {out['tenant_id']}, policy version {out['policy_version']}: {verdict}; "
        f"would hit: {'yes' if out['would_hit'] else 'no'}",
        f"partition {part[:16]} ({out['partition_size']} entries), threshold "
        f"{out['threshold']}, best score {best}",
        "",
        table(("check", "result", "detail"), steps),
    ]
    if out["candidates"]:
        cols = ("entry_id", "score", "above_threshold", "expired", "refusal", "question")
        lines += ["", table(cols, [[cand.get(k) for k in cols] for cand in out["candidates"]])]
    if out.get("entity_comparison"):
        lines += ["", "entities: " + cell(out["entity_comparison"], 2000)]
    return "\n".join(lines)


def _cache_explain(c: AdminClient, a: argparse.Namespace) -> tuple[Any, str]:
    body: dict[str, Any] = {"endpoint": a.endpoint, "top_k": a.top_k}
    if (a.question is None) == (a.body is None):
        raise UsageError("give a question, or --body FILE (- for stdin), not both")
    if a.body is not None:
        # the request as the client sends it: its parameters key the partition, so a
        # question alone (a chat body with default parameters) missed every entry a
        # client with temperature or max_tokens stored (session 45's review)
        try:
            raw = sys.stdin.read() if a.body == "-" else Path(a.body).read_text(encoding="utf-8")
            body["body"] = json.loads(raw)
        except OSError as exc:
            raise UsageError(f"cannot read --body: {type(exc).__name__}") from None
        except (ValueError, RecursionError):
            raise UsageError("--body must hold a JSON object (the request body)") from None
        if not isinstance(body["body"], dict):
            raise UsageError("--body must hold a JSON object (the request body)")
    else:
        body["question"] = a.question
    if a.model:
        body["model"] = a.model
    if a.user:
        body["user"] = a.user
    out = c.explain(a.tenant, body)
    return out, _explain_text(out)


# ---- wiring ----------------------------------------------------------------------------
def _common() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--url", default=None, help="gateway URL (default CACHEGATE_ADMIN_URL)")
    p.add_argument("--token", default=None, help="admin token (default CACHEGATE_ADMIN_TOKEN)")
    p.add_argument("--json", action="store_true", help="print the API's JSON")
    return p


def add_admin_commands(sub: Any) -> None:
    """Adds ``tenants``, ``keys``, ``policy`` and ``cache`` to the ``cachegate`` parser's
    subcommands (``sub`` is what ``add_subparsers`` returned)."""
    common = [_common()]

    def leaf(group: Any, name: str, handler: Handler, help_: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = group.add_parser(name, parents=common, help=help_)
        p.set_defaults(func=_runner(handler))
        return p

    tenants = sub.add_parser("tenants", help="list, create, disable, enable, delete tenants")
    t = tenants.add_subparsers(dest="action", required=True)
    p = leaf(t, "list", _tenants_list, "all tenants")
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--offset", type=int, default=0)
    p = leaf(t, "create", _tenants_create, "a new tenant")
    p.add_argument("tenant", help="id: letters, digits, _.- (64 at most)")
    p.add_argument("--name", default=None)
    p.add_argument("--policy", default=None, metavar="FILE", help="initial policy, JSON")
    for name, handler, help_ in (
        ("disable", _tenants_disable, "its keys get 403 from the next request (data kept)"),
        ("enable", _tenants_enable, "undo disable"),
        ("delete", _tenants_delete, "remove the tenant and all its data"),
    ):
        p = leaf(t, name, handler, help_)
        p.add_argument("tenant")
    p.add_argument("--yes", action="store_true", help="confirm the deletion")

    keys = sub.add_parser("keys", help="create, list, revoke a tenant's API keys")
    k = keys.add_subparsers(dest="action", required=True)
    p = leaf(k, "create", _keys_create, "a new key, printed once")
    p.add_argument("tenant")
    p.add_argument("--name", default="", help="a label for the key")
    p = leaf(k, "list", _keys_list, "the tenant's keys (prefixes only)")
    p.add_argument("tenant")
    p = leaf(k, "revoke", _keys_revoke, "refuse the key from its next request on")
    p.add_argument("tenant")
    p.add_argument("key_id", type=int)

    policy = sub.add_parser("policy", help="show or change a tenant's policy")
    pol = policy.add_subparsers(dest="action", required=True)
    p = leaf(pol, "get", _policy_get, "the tenant's current policy")
    p.add_argument("tenant")
    p = leaf(pol, "set", _policy_set, "change fields (the others are kept)")
    p.add_argument("tenant")
    p.add_argument("changes", nargs="*", metavar="key=value", help="e.g. threshold=0.92")
    p.add_argument("--file", default=None, help="a JSON object of fields to change")
    p.add_argument(
        "--if-version",
        type=int,
        default=None,
        metavar="N",
        help="change only if N is still the latest version (as `policy get` showed it)",
    )

    cache = sub.add_parser("cache", help="the semantic cache of a tenant")
    ca = cache.add_subparsers(dest="action", required=True)
    p = leaf(ca, "explain", _cache_explain, "would this question hit, and if not why?")
    p.add_argument("question", nargs="?", default=None)
    p.add_argument(
        "--body",
        default=None,
        metavar="FILE",
        help="the request body as the client sends it (JSON; - for stdin): its parameters "
        "choose the partition",
    )
    p.add_argument("--tenant", required=True)
    p.add_argument("--model", default=None, help="default: the first model served")
    p.add_argument("--endpoint", default="chat", choices=["chat", "completion"])
    p.add_argument("--top-k", type=int, default=5, help="nearest entries to show (5)")
    p.add_argument(
        "--user", default=None, help="the end user (a tenant whose semantic_scope is user)"
    )
