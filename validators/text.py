"""Input checking and normalization shared by every extractor and guard.

``prepare(text)`` is the only entry point: it accepts ``str`` (or UTF-8
``bytes``), rejects bad input with a typed ``InvalidTextError`` and returns the
NFKC-normalized text that all patterns run on.

Limit: ``MAX_TEXT_CHARS`` (100,000 characters, counted after decoding and
before normalization). A cached *question* is short; anything longer is a
document, not a question, and is refused rather than scanned.
"""

from __future__ import annotations

import re
import unicodedata

from validators.errors import (
    EmptyTextError,
    InvalidUTF8Error,
    TextTooLongError,
    TextTypeError,
)

MAX_TEXT_CHARS = 100_000

# C0/C1 control characters except tab and newline; the extractor uses NUL as
# its mask character, so none of these may survive normalization.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_QUOTES = str.maketrans({"’": "'", "‘": "'", "`": "'", "“": '"', "”": '"'})
# Traditional Chinese characters the rules use, folded to their simplified forms one
# character for one (so offsets stay valid): 天氣 → 天气, 現在幾點 → 现在几点, 後天 →
# 后天, 下週 → 下周, 這個月 → 这个月, 餘額 → 余额. Only characters whose traditional form
# has one simplified reading in these rules are listed; 參/叄 stay (formal numerals).
_TRADITIONAL = (
    "東兩個為爲麼麽義買億萬僅們價會餘償關決況凍減幾刪別劑辦動區醫單賣發號後嗎啟啓員圓",
    "場塊處夠頭寶實對師帳幫應開異強當錄態懷戶換掛據報時顯機權條來樣歐氣匯沒溫點燒無狀",
    "現療盤碼確禮離種積類糾約級紛線經綁結絕統維緩編聯薦藥認議訊記論訟設證識訴診試話詢",
    "該語調謂財賬貨購貳貸資賠轉辭過運還這違連遞鐘錢銷鎖錯鎊閉間聞閱陸險隱韓預額風駁驗",
    "驟週裡裏臺準於係歲問請張銀灣國門誰註斷數鑑鑒費選舉總熱黃幣訂聽說讓給從並貴錶漲撥",
    "掃習網頁鍵電腦視車飛擔憂養壓產婦兒嬰寵",
)
_SIMPLIFIED = (
    "东两个为为么么义买亿万仅们价会余偿关决况冻减几删别剂办动区医单卖发号后吗启启员圆",
    "场块处够头宝实对师帐帮应开异强当录态怀户换挂据报时显机权条来样欧气汇没温点烧无状",
    "现疗盘码确礼离种积类纠约级纷线经绑结绝统维缓编联荐药认议讯记论讼设证识诉诊试话询",
    "该语调谓财账货购贰贷资赔转辞过运还这违连递钟钱销锁错镑闭间闻阅陆险隐韩预额风驳验",
    "骤周里里台准于系岁问请张银湾国门谁注断数鉴鉴费选举总热黄币订听说让给从并贵表涨拨",
    "扫习网页键电脑视车飞担忧养压产妇儿婴宠",
)
_FOLD = str.maketrans("".join(_TRADITIONAL), "".join(_SIMPLIFIED))


def prepare(text: object, *, fold_traditional: bool = True) -> str:
    """Validate ``text`` and return it NFKC-normalized (full-width digits and
    punctuation become ASCII, curly apostrophes become ``'``, control
    characters become spaces) and, unless ``fold_traditional`` is false, with the
    traditional Chinese characters of ``_TRADITIONAL`` in their simplified forms
    (one character for one). Length is otherwise kept."""
    if isinstance(text, bytes | bytearray | memoryview):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidUTF8Error(f"text is not valid UTF-8: {exc}") from None
    if not isinstance(text, str):
        raise TextTypeError(f"text must be str or UTF-8 bytes, not {type(text).__name__}")
    if len(text) > MAX_TEXT_CHARS:
        raise TextTooLongError(f"text has {len(text)} characters; the limit is {MAX_TEXT_CHARS}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidUTF8Error(f"text holds characters UTF-8 cannot encode: {exc}") from None
    if not text.strip():
        raise EmptyTextError("text is empty")
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES)
    if fold_traditional:
        text = text.translate(_FOLD)
    return _CONTROL.sub(" ", text)
