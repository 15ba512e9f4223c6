"""The gateway-side findings of issue 14, each as a test that failed on the old code.
(The auth cache, metrics access, tenant re-creation, the vector LRU and shared rate
limits have their own files beside the code they test.)"""

from __future__ import annotations

import pytest

from tests.gateway.conftest import assert_openai_error
from tests.hardening.checks import check_response, check_stream
from tests.hardening.conftest import Target

pytestmark = pytest.mark.slow

CHAT = "/v1/chat/completions"
LONG_ZH = "这是一个很长的问题" * 40


@pytest.mark.parametrize("stream", [False, True])
def test_long_chinese_question_in_a_non_empty_partition(target: Target, stream: bool) -> None:
    body = target.chat_body(LONG_ZH) | {"stream": stream}
    with target.gw.http(target.key) as c, c.stream("POST", CHAT, json=body) as r:
        text = r.read().decode()
    check_response(r)
    assert r.status_code == 200, text  # before: 500 UnicodeEncodeError after the model ran
    if stream:
        check_stream(text)
    # A reason token (too_many_tokens with the bundled embedder), never the question.
    assert r.headers["x-cachegate-semantic"].split(":")[0] in ("skipped", "miss")


def test_too_many_messages_is_a_400_before_any_work(target: Target) -> None:
    turn = {"role": "user", "content": "hi"}
    body = target.chat_body() | {"messages": [turn] * 2049}
    with target.gw.http(target.key) as c:
        r = c.post(CHAT, json=body)
        ok = c.post(CHAT, json=target.chat_body() | {"messages": [turn] * 3})
    err = assert_openai_error(r, 400, "invalid_request_error")
    assert err["param"] == "messages" and "2048" in err["message"]
    assert ok.status_code == 200, ok.text  # control: a normal conversation is served
