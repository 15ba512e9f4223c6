"""Languages a question names: the language an answer is asked in, or about.

Kind ``language``: an ISO 639-1 style code for every language named where it names a
language, in English (any case) or Chinese: after a word that takes one ("in", "to",
"speak", "translate", 用, 说, 成 …) or before one that follows it ("word", "version",
"translation", 回答, 翻译 …). "Answer in Japanese" / "answer in japanese" / "用日语回答"
→ ``{"ja"}``; "Translate to Spanish" → ``{"es"}``; Mandarin is ``zh``, Cantonese
``yue``. "Why is the sky blue?" and "Why is the sky blue? Answer in Japanese." differ
(one side has a language), as do "How do you say hello in French?" and "… in German?".
A nationality ("Chinese food", "English cooking", "中文意思") is no language here;
written capitalised mid-sentence it is a ``name`` (``validators.names``), compared
more leniently.

**Rule.** As most kinds: a language named in either text must be named in both.
English named in a text without Chinese characters is no language (the answer to an
English question is English already).
Currency names run first ("Japanese yen" is the currency ``JPY``, no language).
"""

from __future__ import annotations

import re

from validators.scan import Scanner, one

_LANGUAGES: dict[str, str] = {
    "english": "en", "spanish": "es", "castilian": "es", "french": "fr", "german": "de",
    "italian": "it", "portuguese": "pt", "dutch": "nl", "russian": "ru", "chinese": "zh",
    "mandarin": "zh", "cantonese": "yue", "japanese": "ja", "korean": "ko", "arabic": "ar",
    "hindi": "hi", "bengali": "bn", "urdu": "ur", "turkish": "tr", "vietnamese": "vi",
    "thai": "th", "indonesian": "id", "malay": "ms", "tagalog": "tl", "filipino": "tl",
    "polish": "pl", "swedish": "sv", "norwegian": "no", "danish": "da", "finnish": "fi",
    "greek": "el", "hebrew": "he", "czech": "cs", "hungarian": "hu", "romanian": "ro",
    "ukrainian": "uk", "persian": "fa", "farsi": "fa", "swahili": "sw", "latin": "la",
    "catalan": "ca", "tamil": "ta", "punjabi": "pa", "esperanto": "eo",
    "中文": "zh", "汉语": "zh", "普通话": "zh", "华语": "zh", "粤语": "yue", "英语": "en",
    "英文": "en", "日语": "ja", "日文": "ja", "韩语": "ko", "韩文": "ko", "朝鲜语": "ko",
    "法语": "fr", "法文": "fr", "德语": "de", "德文": "de", "西班牙语": "es", "西语": "es",
    "俄语": "ru", "俄文": "ru", "意大利语": "it", "葡萄牙语": "pt", "阿拉伯语": "ar",
}  # fmt: skip
_EN = "|".join(sorted((k for k in _LANGUAGES if k.isascii()), key=len, reverse=True))
_ZH = "|".join(sorted((k for k in _LANGUAGES if not k.isascii()), key=len, reverse=True))
# A language name is read only where it names a language, not a nationality ("Chinese
# food", "English cooking"): after a word that takes one, or before one that follows it.
_EN_BEFORE = (
    r"in|into|to|from|speak|speaks|speaking|spoken|learn|learning|say|write|written|reply"
    r"|respond|answer|translate|translated|translation|subtitles|dub|dubbed|native"
)
_EN_AFTER = (
    r"translation|translations|version|language|languages|word|words|phrase|speaker|speakers"
    r"|subtitles|lessons?|class|classes|course|courses|grammar|alphabet|characters|for"
)
_ZH_BEFORE = "用说讲成为以学会"
_ZH_AFTER = r"回答|回复|怎么说|怎么讲|翻译|版|写|说|讲|单词|字幕|课"
_PHRASE_END = (
    r"\s*(?:$|[^\sA-Za-z]|(?:please|pls|language|and|or|too|instead|only|for|with|to|so"
    r"|then|now|from|by|as|if|when|but|is|are|was|in|on|at|the|this|that|it|me|you)(?![A-Za-z]))"
)
LANGUAGE = re.compile(
    # after "in", "speak"...: only where the phrase ends ("in Japanese.", "in dutch
    # please"), not before a noun ("in French Polynesia", "in french fries")
    rf"(?<![A-Za-z0-9_])(?:(?:{_EN_BEFORE})\s(?:the\s)?(?P<a>{_EN})(?={_PHRASE_END})"
    rf"|(?P<b>{_EN})(?=\s(?:{_EN_AFTER})(?![A-Za-z])))(?![A-Za-z0-9_])"
    rf"|(?<=[{_ZH_BEFORE}])(?P<c>{_ZH})|(?P<d>{_ZH})(?={_ZH_AFTER})",
    re.IGNORECASE,
)


_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def _language(m: re.Match[str]) -> list[tuple[str, str]] | None:
    name = next(g for g in m.groups() if g)
    code = _LANGUAGES.get(name.lower())
    if code == "en" and not _HAN.search(m.string):
        # An English text's answer is English anyway: "What does carpe diem mean in
        # English?" asks what "What does carpe diem mean?" asks. (A Chinese text asking
        # for English keeps it: its plain answer would be Chinese.) Masked all the same.
        return []
    return one("language", code)


def extract_languages(scan: Scanner) -> None:
    scan.take(LANGUAGE, _language)
