"""How the engine pool picks a replica's key (gateway/proxy/engine_pool.py) and how it is
built from settings: pure functions, no engine, no sockets."""

from __future__ import annotations

from pathlib import Path

from gateway.proxy.engine_pool import build_upstream, prompt_prefix, route_key
from gateway.proxy.http_upstream import HttpUpstream
from tests.gateway.conftest import gateway_settings
from tests.gateway.pool_peers import MODEL, chat, words

SYSTEM = words(80, start=0)  # ~300 characters: longer than route_prefix_chars (256)


def test_prompt_prefix_reads_the_prompt_as_the_engine_sees_it() -> None:
    parts = {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]}
    body = {"messages": [parts, {"role": "user", "content": "Hi"}, {"role": "assistant"}]}
    assert prompt_prefix("chat", body, 256) == "system\nBe brief.\nuser\nHi\nassistant\n\n"
    assert prompt_prefix("chat", body, 8) == "system\nB"
    assert prompt_prefix("completion", {"prompt": "abcdef"}, 3) == "abc"
    assert prompt_prefix("completion", {"prompt": ["abcdef"]}, 3) == "abc"
    # Token ids: about 4 characters a token, so 16 characters keep the first 4 tokens.
    assert prompt_prefix("completion", {"prompt": list(range(100))}, 16) == "[0, 1, 2, 3]"


def test_route_key_is_namespace_model_and_the_first_characters() -> None:
    same = [route_key(chat(SYSTEM, q), 256) for q in ("t5", "t6 t7")]
    assert same[0] == same[1]  # past the first 256 characters the prompt no longer matters
    assert route_key(chat("t5 " + SYSTEM, "t5"), 256) != same[0]  # before, it does
    assert route_key(chat(SYSTEM, "t5"), 2000) != route_key(chat(SYSTEM, "t6"), 2000)
    assert route_key(chat(SYSTEM, "t5", namespace="tenant:b"), 256) != same[0]
    other_model = chat(SYSTEM, "t5")
    other_model.body["model"] = "other"
    assert route_key(other_model, 256) != same[0]


def test_build_upstream_mirrors_the_http_settings(tmp_path: Path) -> None:
    urls = "http://127.0.0.1:1, http://127.0.0.1:2/"
    pool = build_upstream(
        gateway_settings(tmp_path, upstream_url=urls, upstream_model=MODEL, upstream_retries=3),
        "salt",
    )
    assert pool.name == "http" and pool.models() == [MODEL]
    assert [s["url"] for s in pool.replica_states()] == ["http://127.0.0.1:1", "http://127.0.0.1:2"]
    assert (pool.route_prefix_chars, pool.cooldown_seconds) == (256, 5.0)
    ups = [r.upstream for r in pool.replicas]
    # Several replicas: one quick retry each, the next replica is the real retry.
    assert all(isinstance(u, HttpUpstream) and u.retries == 1 and u.salt == "salt" for u in ups)
    settings = gateway_settings(tmp_path, upstream_url="http://h:1", upstream_retries=3)
    one = build_upstream(settings, "")
    assert isinstance(one.replicas[0].upstream, HttpUpstream)
    assert one.replicas[0].upstream.retries == 3  # one replica: as configured
