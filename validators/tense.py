"""Done or to come: a yes-no question about a decision already taken against one still
ahead, the polarity pair ``event_done``.

"Have you stopped selling gift cards?" and "Will you stop selling gift cards?", "Has
the price gone up?" and "Will the price go up?", 取消了吗 / 会取消吗: the answer to one
("yes, last month") is no answer to the other ("not that we know of"), yet the
embedder and the pair verifier read them as one question (a hunt of session 46).

Only the question's head is read, and only for acts a business or a service decides
(stop, discontinue, cancel, close, end, raise or lower a price, remove, start
charging), so "Has my card arrived?" against "When will my card arrive?" — one
status asked two ways in support traffic — is no contrast: the verb is not one of
these, and the second is no yes-no question. Both texts must be read, oppositely
(``default`` "any", as the antonyms).
"""

from __future__ import annotations

from validators.opposites import ActionPair

_HEAD = r"^[\W_]*(?:(?:so|and|but|also|hi|hello|hey|ok|okay|there|please)[\W_]+)*"
_WHO = r"(?:[a-z'’]+\s){1,3}?"  # "you", "the store", "your company"
_DONE_VERBS = (
    r"(?:stopped|discontinued|cancell?ed|closed|shut\sdown|ended|raised|increased"
    r"|lowered|reduced|removed|dropped|started\scharging|gone\sup|gone\sdown|changed)"
)
_TO_COME_VERBS = (
    r"(?:stop|discontinue|cancel|close|shut\sdown|end|raise|increase|lower|reduce|remove"
    r"|drop|start\scharging|go\sup|go\sdown|change)"
)
_DONE_EN = (
    rf"{_HEAD}(?:have|has)\s{_WHO}(?:already\s|just\s|recently\s)?(?:been\s)?{_DONE_VERBS}(?![a-z])"
    rf"|{_HEAD}did\s{_WHO}(?:already\s|just\s|recently\s)?{_TO_COME_VERBS}(?![a-z])"
)
_TO_COME_EN = (
    rf"{_HEAD}(?:will|would)\s{_WHO}(?:ever\s|soon\s|eventually\s)?(?:be\s)?"
    rf"(?:{_TO_COME_VERBS}|{_DONE_VERBS})(?![a-z])"
    rf"|{_HEAD}(?:are|is)\s{_WHO}going\sto\s{_TO_COME_VERBS}(?![a-z])"
    rf"|{_HEAD}(?:are|is)\s{_WHO}(?:planning|about)\sto\s{_TO_COME_VERBS}(?![a-z])"
)
# 停 alone only where no longer act begins with it (停售了 is not 停 + 售了)
_ZH_ACTS = (
    r"(?:取消|停止|停售|停产|停运|停业|关闭|关门|倒闭|下架|涨价|降价|收费"
    r"|停(?![止售产运业用车]))"
)
# a word between the act and its 了 (取消成功了吗), not a negation (取消不了吗: cannot)
_ZH_BETWEEN = r"(?:(?![不没了])[\u4e00-\u9fff]){0,2}?"
# 会 not of 会员 / 会议 / 社会 / 机会 (the diff review: 会员已经取消了吗 against 会员取消成功
# 了吗 was refused)
_WILL_ZH = r"(?<![社机学聚开约协工大晚宴舞体])会(?![员议计场所话谈])"
# 取消了吗 / 取消成功了吗 / 是不是取消了: asked of what is done; 会取消吗 / 会不会取消 /
# 要不要取消: of what comes
_DONE_ZH = (
    rf"(?:已经)?{_ZH_ACTS}{_ZH_BETWEEN}了(?=吗|没|没有|么|？|\?|$)|是不是(?:已经)?{_ZH_ACTS}了"
)
_TO_COME_ZH = (
    rf"(?:{_WILL_ZH}不{_WILL_ZH}|将{_WILL_ZH}|将要|是否{_WILL_ZH}|打算|准备|要不要|{_WILL_ZH})"
    rf"(?:[\u4e00-\u9fff]{{0,4}}?){_ZH_ACTS}(?!{_ZH_BETWEEN}[了过])"
)

TENSE_PAIRS = (
    ActionPair("event_done", f"{_DONE_EN}|{_DONE_ZH}", f"{_TO_COME_EN}|{_TO_COME_ZH}", "any"),
)
