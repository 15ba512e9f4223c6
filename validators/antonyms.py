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

# what a minor / major one is of (a minor is also a child: only before these)
# what "all of" / "some of" is read before: a sum one holds or owes, not "all of my
# identification details" against "part of bank policy", nor "some of my card payments"
# (BANKING77 files each with its other side)
_OWNED = (
    r"(?:my|the|your|our|this|that)\s(?:[a-z]+\s)?(?:money|funds|balance|savings|pension"
    r"|deposit|points|miles|credits?|shares|stocks?|invoice|bill|loan|debt|salary|bonus"
    r"|allowance|leave|pto|vacation\sdays|refund|premium|fees?|tuition|rewards|cashback)(?![a-z])"
)
_HARM = (
    r"(?:injur(?:y|ies)|damage|scratch(?:es)?|dents?|accidents?|offen[cs]es?|violations?"
    r"|surger(?:y|ies)|burns?|cuts?|symptoms?|issues?|problems?|repairs?|cracks?|illness(?:es)?"
    r"|side\seffects?|bugs?|updates?|upgrades?)"
)

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
    # "least expensive" is the cheapest (session 50's misfire hunt: refused against it)
    (
        "cheap",
        r"cheap(?:er|est)?|inexpensive|(?:least|less)\s(?:expensive|pricey|costly)",
        r"(?<!least\s)(?<!less\s)(?:expensive|pricey|costly)",
    ),
    ("fast", r"fast(?:er|est)?|quick(?:er|est|ly)?", r"slow(?:er|est|ly)?"),
    ("early", r"early|earlier", r"late"),
    ("hot", r"hot(?:ter|test)?", r"cold(?:er|est)?"),
    ("true", r"true", r"false"),
    ("strong", r"strong(?:er|est)?", r"weak(?:er|est)?"),
    # Directions and levels (session 43: a review found each served for its opposite at
    # verifier scores of 0.982-0.996: "symptoms of high / low blood pressure", "turn
    # left / right at a roundabout", "zoom in / out", "east / west coast"). Only the base
    # forms ("higher", "lower" are comparisons and a verb, read elsewhere); left and
    # right only as a side or a turn, never "money left" or "the right amount".
    # "how high / how low is my tire pressure" asks one level from two ends (as ease,
    # above): not read there
    ("high", r"(?<!how\s)high", r"(?<!how\s)low"),
    (
        "side",
        r"(?:turn(?:ing|s)?|to\s(?:the|your)|on\s(?:the|your)|keep|bear|swipe|scroll)\sleft"
        r"|left(?=[\s-](?:lane|side|hand(?:ed)?|click|turn|arm|leg|eye|ear|foot|knee|ventricle"
        r"|hemisphere|lung|kidney|wing|margin|column|join|outer))",
        r"(?:turn(?:ing|s)?|to\s(?:the|your)|on\s(?:the|your)|keep|bear|swipe|scroll)\sright"
        r"(?!\s(?:track|way|time|one|answer|amount|place|person|now|away))"
        r"|right(?=[\s-](?:lane|side|hand(?:ed)?|click|turn|arm|leg|eye|ear|foot|knee|ventricle"
        r"|hemisphere|lung|kidney|wing|margin|column|join|outer))",
    ),
    (
        # a verb's direction: zoom in / out, check in / out; not "cash in" (rewards are
        # cashed in or out alike, and "cash in the ATM" is a place)
        "particle",
        # and the nouns: a refund "at check-in" / "at check-out" (session 45)
        r"(?:zoom|check|clock|plug|breathe|move|moving|moved|fade)(?:s|ed|ing)?[\s-]in",
        r"(?:zoom|check|clock|plug|breathe|move|moving|moved|fade)(?:s|ed|ing)?[\s-]out",
    ),
    ("bound", r"inbound|incoming|inward", r"outbound|outgoing|outward"),
    (
        "level",  # going up or down, and the things that do
        r"(?:go|goes|going|went|scroll(?:s|ing)?|swipe|turn(?:s|ing)?|round(?:ed|ing)?|trend"
        r"(?:s|ing)?)\sup|upstairs|uphill|upward|upwards|ascending",
        r"(?:go|goes|going|went|scroll(?:s|ing)?|swipe|turn(?:s|ing)?|round(?:ed|ing)?|trend"
        r"(?:s|ing)?)\sdown|downstairs|downhill|downward|downwards|descending",
    ),
    ("axis", r"vertical(?:ly)?", r"horizontal(?:ly)?"),
    # Session 44 (a review found each served for its opposite at verifier scores of
    # 0.989-0.996): taxes included / excluded, import / export duties, input / output
    # voltage, the nearest / farthest planet, an overactive / underactive thyroid, a
    # payment that succeeded / failed; a LEFT / RIGHT JOIN under "side" above.
    ("include", r"includ(?:e|es|ed|ing)", r"exclud(?:e|es|ed|ing)"),
    ("import", r"import(?:s|ed|ing)?", r"export(?:s|ed|ing)?"),
    ("input", r"inputs?", r"outputs?"),
    ("near", r"nearest|closest", r"farthest|furthest"),
    ("longest", r"longest", r"shortest"),
    (
        "over",
        r"over[\s-]?(?:active|cooked|inflated|weight|paid|charged|dos(?:e|ed|ing)|exposed"
        r"|estimat(?:e|ed|ing)|staffed|funded|ripe|done)",
        r"under[\s-]?(?:active|cooked|inflated|weight|paid|charged|dos(?:e|ed|ing)|exposed"
        r"|estimat(?:e|ed|ing)|staffed|funded|ripe|done)",
    ),
    (
        "success",
        r"succe(?:ed|eds|eded|eding|ssful|ssfully)",
        r"fail(?:s|ed|ing)?|unsuccessful(?:ly)?",
    ),
    # Session 45 (a review, served at verifier 0.985-0.996): encrypt / decrypt a PDF,
    # compress / decompress a video, a hotel near / far from the airport, polite / rude
    # to tip, a public / private beach (and key)
    ("encrypt", r"encrypt(?:s|ed|ing|ion)?", r"decrypt(?:s|ed|ing|ion)?"),
    (
        "compress",
        r"compress(?:es|ed|ing|ion)?",
        r"decompress(?:es|ed|ing|ion)?|unzip(?:s|ped|ping)?",
    ),
    ("distance", r"near(?!ly|est|by)|close\sto", r"far\s(?:away\s)?from"),
    ("polite", r"polite(?:ly)?|courteous", r"rude(?:ly)?|impolite(?:ly)?"),
    ("public", r"public(?:ly)?", r"private(?:ly)?"),
    ("east", r"east(?:ern)?|eastbound", r"west(?:ern)?(?!\sunion)|westbound"),
    ("north", r"north(?:ern)?|northbound", r"south(?:ern)?|southbound"),
    # Session 48 (a misfire hunt, served at verifier 0.983-0.996): lengthen / shorten a
    # loan term, postpone / bring forward a start date, pause / resume a subscription
    ("length", r"extend(?:s|ed|ing)?|lengthen(?:s|ed|ing)?", r"shorten(?:s|ed|ing)?"),
    (
        "postpone",
        r"postpon(?:e|es|ed|ing)|push(?:es|ed|ing)?\s(?:\w+\s){0,4}?back|defer(?:s|red|ring)?",
        r"(?:bring(?:s|ing)?|brought)\s(?:\w+\s){0,4}?forward|mov(?:e|es|ed|ing)\s(?:\w+\s){0,4}?"
        r"(?:forward|earlier)",
    ),
    (
        "pause",
        r"paus(?:e|es|ed|ing)|suspend(?:s|ed|ing)?",
        r"resum(?:e|es|ed|ing)|unpaus(?:e|es|ed|ing)|reactivat(?:e|es|ed|ing)",
    ),
    # Session 50 (a misfire hunt, served at verifier 0.985-0.996): a font bigger / smaller,
    # a warranty longer / shorter ("no longer" is no comparison), a bag heavier / lighter,
    # a screen brighter / darker, an upload sped up / slowed down, the full / a partial
    # refund (and the whole / part of a trip)
    ("size", r"bigger|larger", r"smaller"),
    ("long", r"(?<!no\s)(?<!any\s)longer", r"shorter"),
    ("heavy", r"heavier", r"lighter"),
    ("bright", r"brighter", r"darker|dimmer"),
    ("wide", r"wider", r"narrower"),
    ("thick", r"thicker", r"thinner"),
    ("speed", r"speed(?:s|ing)?\sup|sped\sup", r"slow(?:s|ing|ed)?\sdown"),
    # session 52: all of / some of what one owns or owes ("Can I withdraw part of my
    # pension?" / "… all of my pension?", "pay part of the invoice" / "the full invoice",
    # served at verifier 0.989-0.996 in a misfire hunt)
    (
        "whole",
        r"full(?=\s(?:refunds?|amount|price|payment|balance|cost|fare|tuition|course|year"
        r"|invoice|bill|deposit|pension|loan|sum|order))"
        # "some or all of my pension" asks what "all or some of" asks (the diff review)
        rf"|in\sfull|(?:the\s)?(?:entire|whole)|(?<!some\sor\s)(?<!part\sor\s)all\sof\s{_OWNED}",
        r"partial(?:ly)?|(?<!every\s)(?<!any\s)(?<!all\s)(?<!each\s)(?<!all\sor\s)part\sof"
        rf"|(?<!all\sor\s)some\sof\s{_OWNED}",
    ),
    # Session 51 (a misfire hunt, served at verifier 0.984-0.996): short- / long-term
    # disability, a temporary / permanent filling or card; mild / severe dehydration, a
    # minor / serious offence. Not a start against an end ("早餐几点开始 / 几点结束" is one
    # intent of the topic pool: the hours answer both) nor required / recommended (CLINC150
    # files "the required / recommended oil change" and travel shots under one intent)
    (
        "term",
        r"short[\s-](?:term|stay)|temporar(?:y|ily)",
        r"long[\s-](?:term|stay)|permanent(?:ly)?",
    ),
    ("severity", r"mild(?:ly)?|slight(?:ly)?", r"severe(?:ly)?"),
    (
        "minor",
        rf"minor(?=\s{_HARM})",
        rf"(?:major|serious)(?=\s{_HARM})",
    ),
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
    # session 44: 进口 / 出口关税, 输入 / 输出电压, 离太阳最近 / 最远, 最长 / 最短 (a review)
    "import": ("进口|导入|入口", "出口|导出"),
    "input": ("输入", "输出"),
    "near": ("最近", "最远"),
    "longest": ("最长", "最短"),
    "success": ("成功", "失败"),
    # session 45: 加密 / 解密, 压缩 / 解压 (a review)
    "encrypt": ("加密", "解密"),
    "compress": ("压缩", "解压"),
    # session 48: 延长 / 缩短, 暂停 / 恢复 (a misfire hunt)
    "length": ("延长|加长", "缩短"),
    "pause": ("暂停", "恢复"),
    # session 50: 更大 / 更小, 更长 / 更短, 更粗 / 更细, 全额 / 部分退款 (a misfire hunt)
    "size": ("更大|调大|放大|变大", "更小|调小|缩小|变小"),
    "long": ("更长|变长", "更短|变短"),
    "thick": ("更粗|加粗|变粗", "更细|变细"),
    # session 52: 全部 / 一部分 of anything (医保报销全部 / 一部分药费, 股票全部 / 一部分卖掉,
    # served at 0.9955-0.9965 in a misfire hunt); 部分 alone only before an amount
    "whole": ("全额|全部", "一部分|部分(?=费用|金额|报销|退款|退还)"),
    # session 51: 短期 / 长期, 轻微 / 严重, 最低 / 推荐配置 (a misfire hunt); a system's
    # minimum configuration against the one recommended, not 要求 / 建议 at large
    "term": ("短期|临时|短租", "长期|永久|长租"),
    "severity": ("轻微|轻度", "严重|重度"),
    "requirement": ("最低配置|最低要求|要求的配置", "推荐配置|建议配置|推荐的配置"),
    "transfer": (
        "给别人转账|转账给别人|转给别人|转出|汇出",
        "收别人的转账|接收转账|收到转账|转入|汇入",
    ),
}
