"""Opposite evaluations: the antonym pairs ``validators.polarity`` reads.

"Classify the sentiment: I love this phone." and "… I hate this phone." differ in
one word the embedder and the verifier both read as a detail. Each entry is
``(name, plus, minus)``: two English words (with their inflections) that name
opposite poles of one scale. Like the prefixed opposites (legal / illegal), a pair
refuses only when **both** texts name it with opposite poles: a text naming one pole
alone ("Is this a good phone?" against "Is this phone worth it?") is no contrast.
So the list only has to be right about what is opposite, not about what is a
synonym, and it stays short: direct antonyms of evaluation, price, speed and
temperature that a cached answer would get backwards. Ease is left out: "How hard is
it to learn Python?" and "Is Python easy to learn?" ask one thing from two ends.

Words that are mostly something else are left out ("like" is mostly a preposition,
"fine" a penalty, "high"/"low" and "more"/"less" are already ``extreme`` and
``comparison`` pairs in ``polarity``). Polarity values: ``antonym_<name>:+`` /
``antonym_<name>:-``.
"""

from __future__ import annotations

ANTONYMS: tuple[tuple[str, str, str], ...] = (
    ("love", r"lov(?:e|es|ed|ing)", r"hat(?:e|es|ed|ing)"),
    # "like" only as a verb after a subject: "I like", "do you like", "customers like"
    (
        "like",
        r"(?:i|we|you|they|people|customers|users)\s(?:really\s|do\s|don't\s|dont\s)?like[sd]?",
        r"dislik(?:e|es|ed|ing)",
    ),
    ("good", r"good", r"bad"),
    ("better", r"better", r"worse"),
    ("best", r"best", r"worst"),
    ("great", r"great|excellent|amazing|wonderful", r"terrible|awful|horrible|poor"),
    ("positive", r"positive", r"negative"),
    ("cheap", r"cheap(?:er|est)?|inexpensive", r"expensive|pricey|costly"),
    ("fast", r"fast(?:er|est)?|quick(?:er|est|ly)?", r"slow(?:er|est|ly)?"),
    ("early", r"early|earlier", r"late"),
    ("hot", r"hot(?:ter|test)?", r"cold(?:er|est)?"),
    ("true", r"true", r"false"),
    ("strong", r"strong(?:er|est)?", r"weak(?:er|est)?"),
)

#: Chinese poles of the same scales (and of one more: rise / fall, 涨 / 跌), as whole
#: words that do not occur inside others in FAQ text: 贵 not in 贵宾 (VIP), 贵姓, 宝贵; 快
#: only as a comparison (最快, 更快), never 快递 (courier), 尽快 (as soon as possible);
#: 慢 not in 慢性 (chronic). Session 38: a review found 最便宜 / 最贵, 最快 / 最慢 and 上涨
#: / 下跌 served each other's answers, where the English words were refused.
ZH_ANTONYMS: dict[str, tuple[str, str]] = {
    "cheap": ("便宜|实惠|低价", "(?<![宝富珍尊高])贵(?![宾姓州阳重族])|昂贵"),
    "fast": ("最快|更快|较快|比较快|快一点|快一些", "最慢|更慢|较慢|比较慢|(?<![怠傲缓])慢(?!性)"),
    "early": ("最早|更早|提前", "最晚|更晚|推迟|延后"),
    "good": ("好评", "差评"),
    "rise": ("上涨|涨价|涨了|升值|走高", "下跌|跌价|跌了|贬值|走低"),
}
