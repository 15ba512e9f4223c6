"""How a cached answer is cut into deltas for a streamed hit (protocol/responses.py)."""

from __future__ import annotations

import json

import pytest

from protocol.responses import RUN_PIECE, ChunkWriter, replay_pieces

TEXTS = [
    "Use the 'forgot password' link on the sign-in page, then follow the e-mail.",
    "您可以在登录页面点击“忘记密码”，然后按照邮件中的步骤重置密码。我们的客服时间是周一至周五。",
    "混合 text: 请访问 https://example.com/a/very/long/path/without/any/space 了解更多。",
    "  leading and trailing spaces  \n\n  and a blank line\n",
    "",
]


@pytest.mark.parametrize("text", TEXTS)
def test_the_pieces_join_to_the_text_exactly(text: str) -> None:
    assert "".join(replay_pieces(text)) == text


def test_text_without_spaces_streams_in_several_deltas() -> None:
    # A Chinese answer has no spaces: before session 44 it was one delta, the whole
    # answer at once, where an English one of the same length streamed in several.
    chinese = TEXTS[1]
    pieces = replay_pieces(chinese)
    assert len(pieces) >= len(chinese) // (4 * RUN_PIECE)
    assert len(pieces) > 1 and max(len(p) for p in pieces) <= 4 * RUN_PIECE
    # the control: English is cut at words, four a delta, as before
    english = replay_pieces(TEXTS[0])
    assert english[0] == "Use the 'forgot password' " and len(english) == 4


def test_the_finish_chunk_carries_the_stored_choice_fields() -> None:
    writer = ChunkWriter("chat", "id-1", "m", include_usage=False)
    events = writer.finish("stop", {}, {"stop_reason": 128009, "finish_reason": "length"})
    choice = json.loads(events[0][len("data: ") :])["choices"][0]
    # an extra field is carried; a built one (finish_reason) is never replaced
    assert choice["stop_reason"] == 128009 and choice["finish_reason"] == "stop"
    plain = json.loads(writer.finish("stop", {})[0][len("data: ") :])["choices"][0]
    assert "stop_reason" not in plain  # the control
