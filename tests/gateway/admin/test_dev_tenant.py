"""The development tenant made at start-up goes through the admin service like every
other tenant write: made once, its key shown once, audited and logged for the other
replicas (real SQLite, migrated by the real history)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import create_engine, select

from gateway.admin.service import DEV_ACTOR, TenantAdmin
from gateway.models import AuditEvent
from gateway.sync.log import TENANT
from gateway.tenants import TenantStore
from migrations.runner import upgrade_database
from semantic.models import CacheChange


def test_dev_tenant_is_made_once_audited_and_logged(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'dev.db'}"
    upgrade_database(url)
    store = TenantStore(create_engine(url))
    admin = TenantAdmin(store, None, None)

    key = admin.ensure_dev_tenant("dev", None)
    assert key is not None and store.authenticate(key).tenant_id == "dev"
    assert admin.ensure_dev_tenant("dev", None) is None  # a second start shows no key
    # A fixed key is added once beside the first; asking again finds it stored.
    assert admin.ensure_dev_tenant("dev", "fixed-dev-key") == "fixed-dev-key"
    assert admin.ensure_dev_tenant("dev", "fixed-dev-key") is None
    assert [k.name for k in admin.list_keys("dev")] == ["dev", "dev"]

    with store.sessions() as s:
        events = s.execute(select(AuditEvent.actor, AuditEvent.action, AuditEvent.tenant_id))
        assert [tuple(e) for e in events] == [
            (DEV_ACTOR, "tenant.create", "dev"),
            (DEV_ACTOR, "key.issue", "dev"),
            (DEV_ACTOR, "key.issue", "dev"),
        ]
        logged = s.scalars(select(CacheChange.op).where(CacheChange.tenant == "dev")).all()
        assert logged == [TENANT] * 3  # other replicas drop their auth caches


def test_a_short_fixed_key_is_never_shown_whole(tmp_path: Path) -> None:
    """Listings and the audit log show a few leading characters of a short fixed
    development key (a quarter at most), never the key itself; a generated key its
    first 10."""
    url = f"sqlite:///{tmp_path / 'dev.db'}"
    upgrade_database(url)
    store = TenantStore(create_engine(url))
    admin = TenantAdmin(store, None, None)
    generated = admin.ensure_dev_tenant("dev", None)
    assert generated is not None
    assert admin.ensure_dev_tenant("dev", "sk-local") == "sk-local"
    assert [k.prefix for k in admin.list_keys("dev")] == [generated[:10], "sk"]
    with store.sessions() as s:
        details = s.scalars(select(AuditEvent.details).where(AuditEvent.action == "key.issue"))
        assert [d["prefix"] for d in details] == [generated[:10], "sk"]
