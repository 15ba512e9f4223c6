"""Scenario guards: questions a tenant's policy may forbid serving from the
semantic cache (seed 003, 不该用语义缓存的场景), checked on the *new* question.

Each guard is a named, ordered rule set; a match names the rule and the
phrase that fired, so a refusal ``guarded:<scenario>`` can be explained and
every rule tested on its own. Guards are deliberately keyword-based: a policy
opts in to them, and a false positive only costs a cache hit (the question
goes to the model), while a false negative serves stale or someone else's
answer.

* ``time_sensitive`` (强时效): now / current / latest, news, prices and rates,
  weather, the clock (实时, 最新, 新闻, 现在, 今日股价, 汇率, 天气).
* ``personalized`` (强个性化, 答案因人而异): the answer depends on the asker's own
  data: the value or state of their records ("what is my balance", "where is my
  order", "why was my transfer declined", 我的订单到哪了), requests to act on them
  ("transfer $100 to savings", "set an alarm"), and PII in the text (emails,
  phone numbers, order/account/card numbers). Not procedural questions that
  merely say "my" ("how do I update my billing address", 怎么修改我的收货地址).
* ``numeric_computation`` (数值敏感): calculate, compute, arithmetic expressions,
  "what is 15% of 200", 计算, 等于多少, 三乘以七.
* ``high_risk`` (高风险决策): medical and legal *advice about someone's situation*
  ("how much aspirin should I take", "can I sue my landlord", 我头痛应该吃什么药)
  and financial advice (should I invest, 投资建议); not encyclopedic facts ("what
  are the side effects of aspirin", 阿司匹林有哪些副作用).
* ``code_generation`` (数值敏感：代码生成): a program asked for ("write a python
  function", 用python写) or a question that is code (:mod:`validators.guard_code`);
  not questions about codes ("generate a new PIN code").

The personalized and high_risk rules are measured against hand-labelled
BANKING77/CLINC150 intents by bench/guard_eval.py (validators/data/intent_labels.json).
"""

from __future__ import annotations

import re
from collections.abc import Collection

from validators.errors import UnknownGuardError
from validators.guard_advice import HIGH_RISK
from validators.guard_base import NOCASE, A, Guard, GuardMatch, GuardRule, Z, en_words, regex_rule
from validators.guard_code import CODE_GENERATION
from validators.guard_personal import PERSONALIZED
from validators.numbers import EN_NUM, ZH_NUM
from validators.quantities import CURRENCY
from validators.text import prepare
from validators.units import UNIT_WORDS

__all__ = [
    "CODE_GENERATION",
    "GUARDS",
    "HIGH_RISK",
    "NUMERIC_COMPUTATION",
    "PERSONALIZED",
    "TIME_SENSITIVE",
    "Guard",
    "GuardMatch",
    "GuardRule",
    "check_guard_names",
    "first_guard",
]

_NUM = rf"(?:(?<![\d.,])\d+(?:[.,]\d+)*|{EN_NUM}|{ZH_NUM})"
_INFO = (
    r"price|prices|rate|rates|value|score|scores|weather|temperature|news|status|traffic|stock"
    r"|market|queue|wait\stime|balance|time"
)

#: 现在 / 目前 / 当前 in a story or an FAQ, not asking a live value: "之前拉黑了一个朋友，现在
#: 和好了，怎么恢复", "订单显示已发货，现在不想要了", "目前支持哪些支付方式" were refused as
#: time-sensitive (session 46's review: 136 of 13,191 Chinese and topic questions);
#: "现在一美元换多少人民币", "现在还开着吗" stay refused.
_ZH_NOW_NOT_LIVE = re.compile(
    r"(?:之前|以前|上次|当时|原来|本来|已经|昨天|去年|买了|订单显示)[^。？！?!]{0,24}[，,]"
    r"[^。？！?!]{0,6}(?:现在|目前)(?![^。？！?!]{0,8}(?:多少|几|价|汇率|开着|营业|开门|人多|空位|堵))"
    r"|(?:现在|目前|当前)(?:不想|想要?|后悔|才|的(?:套餐|专业|教练|卡|会员|宽带|限额|账号|号码))"
    r"|目前(?:支持|提供|开通|有哪些|哪些|可以用?哪|能用哪)"
)

#: How to update to whatever is newest ("How do I update the app to the latest
#: version?", 怎么升级到最新版本): the steps are one answer for everyone and do not
#: change with each release; what the newest version *is* ("What is the latest
#: version?", a question word before it) stays time-sensitive.
_UPDATE_HOWTO = re.compile(
    r"^(?!.*\b(?:what|which|when)(?:'s|\s(?:is|are|was))?\s(?:the\s)?(?:latest|newest|most\srecent)\b)"
    r"(?=.*\b(?:how\s(?:do|can|should|would|to)|steps?\sto|(?:can|could)\syou\s(?:help|tell|show)"
    r"|i\s(?:want|need|would\slike)\sto|where\s(?:do|can)\si)\b)"
    r"(?=.*\b(?:update|upgrade|install|download|get|keep|stay)\b[^?.!]{0,40}?"
    r"(?:\b(?:latest|newest|most\srecent)\s(?:version|release|update|build|firmware|os)\b"
    r"|\bup[\s-]to[\s-]date\b))"
    r"|(?:怎么|如何|怎样|咋)(?:才能)?(?:更新|升级|下载|安装)(?:到|成)?最新(?:版|版本|系统|固件)",
    NOCASE | re.DOTALL,
)

#: "the time" that is no clock: "What is the time frame for a refund?", "the time limit
#: to dispute a charge", "the time zone of France" (session 46's review: 37 refused)
_NOT_CLOCK = (
    r"(?!\s(?:frames?|limits?|zones?|periods?|windows?|difference|needed|required|allowed"
    r"|it\stakes|of\s(?:year|day|the\s(?:year|day|month))|between|spent))"
)

#: How rates or prices are set, where they come from, what one is ("How are exchange
#: rates calculated?", "Where do you get your exchange rates from?", 汇率是怎么算的):
#: a policy, the same answer every day; a rate's value ("What is the euro to dollar
#: rate?", today's, 美元兑人民币汇率多少) stays time-sensitive (session 46's review:
#: 64 such BANKING77 questions were refused).
_HOW_RATES_WORK = re.compile(
    r"^(?!.*\b(?:current|currently|today'?s?|right\snow|now|live|latest)\b)"
    # not when a rate's value is asked too ("What is the USD to EUR rate? Explain briefly.")
    r"(?!.*\bwhat(?:'s|\sis|\sare)\s(?:the|your|today'?s)\s(?:[\w-]+\s){0,4}?rates?\b)(?:"
    r".*\bhow\s(?:is|are|do|does)\b.{0,40}\b(?:calculated|determined|set|decided|worked\sout"
    r"|chosen|applied|updated|made|work)\b"
    r"|.*\bwhere\s(?:do|does|did)\s(?:you|they|the\s\w+)\s(?:get|take|source|find)\b"
    r"|.*\b(?:come|comes)\sfrom\b|.*\bbased\son\b|.*\bsource\sof\b"
    r"|.*\b(?:policy|policies|explain|mean|meaning|definition)\b"
    r"|.*\bwhat\s(?:is|are)\s(?:an?\s)?(?:exchange\srates?|stock\smarket|share\sprices?)\s*\??$"
    r"|.*\b(?:same|different)\s(?:on|at|during|over)\s(?:the\s)?weekends?\b"
    r"|.*\bhow\soften\b"
    r"|.*(?:怎么|如何|怎样|是怎么)(?:算|计算|确定|定|更新)|.*(?:按|根据)(?:什么|哪个|哪些)"
    r"|.*多久(?:更新|变)|.*(?:是什么意思|的定义|指的是什么))",
    NOCASE | re.DOTALL,
)

#: "latest" as a deadline, a policy that does not change with time (session 50's misfire
#: hunt: "What is the latest I can check in?", "the latest time to return an item", "the
#: latest check-out time" were never cached), and "… at the latest" ending a clause; not
#: "the latest return policy", "at the latest Apple event", "the latest you can tell me"
#: (the diff review).
_DEADLINE = (
    r"\s(?:(?:possible\s)?(?:time|date|day|hour)s?\s)?(?:(?:that\s)?(?:i|we|one|they|he|she)"
    r"\s(?:can|could|may|might|should|must|am\sable|is\sable|are\sable)|to\s(?!know|hear|say))"
    r"|\s(?:check[\s-]?(?:in|out)|arrival|departure|cancell?ation|return|submission|booking"
    r"|sign[\s-]?up|registration|drop[\s-]?off|pick[\s-]?up)(?:\s(?:time|date|day|hour)s?)?"
    r"(?=\s*(?:[?.!,;]|$)|\s(?:for|on|at|in)\s(?:my|a|an|the|this|our)\b)"
)
_AT_THE_LATEST = r"(?<!at\sthe\s)latest|(?<=at\sthe\s)latest(?!\s*(?:[?.!,;]|$))"

TIME_SENSITIVE = Guard(
    "time_sensitive",
    "answers that change with time: now/current/latest, news, prices and rates, weather, the clock",
    (
        regex_rule(
            "now",
            en_words(
                r"right\snow|just\snow|as\sof\s(?:now|today)|at\sthe\smoment"
                rf"|(?:{_INFO})\s(?:is\s|are\s)?(?:right\s)?now"
                # not what a business offers: "Which countries do you currently support?"
                # is an FAQ (session 46's review)
                r"|(?:currently|at\spresent)(?!\s(?:support|supports|accept|accepts|offer|offers"
                r"|ship|ships|provide|provides|allow|allows|sell|sells|serve|serves|operate"
                r"|operates|work\swith|partner\swith)(?![a-z]))"
            )
            + r"|现在|目前|当前|此刻|眼下",
            unless=_ZH_NOW_NOT_LIVE,
        ),
        regex_rule(
            "latest",
            en_words(
                rf"(?:{_AT_THE_LATEST})(?!{_DEADLINE})|newest|most\srecent|up[\s-]to[\s-]date"
                r"|breaking|just\sreleased"
            )
            + r"|最新|最近的?(?:新闻|消息|动态)",
            unless=_UPDATE_HOWTO,
        ),
        regex_rule(
            "current_value",
            en_words(rf"(?:current|today'?s|live|real[\s-]?time|tonight'?s)\s(?:{_INFO})")
            + r"|实时|即时",
        ),
        # "Is the store open today?": cached for a day, yesterday's yes answered Sunday's
        # question (session 45's review; "today" is a relative date, equal every day)
        regex_rule(
            "today_status",
            en_words(
                r"(?:open|opens|closed|close|closes|opening|closing|available|running|operating"
                r"|working|delivering"
                r"|on\stime|delayed|cancell?ed|busy|crowded)\s(?:today|tonight|this\s(?:morning"
                r"|afternoon|evening))"
            )
            + r"|今天(?:还|几点)?(?:营业|开门|开放|关门|上班|有货|能到|发货|停运|延误)"
            + r"|今晚(?:营业|开门|开放)",
        ),
        regex_rule("news", en_words(r"news|headlines?") + r"|新闻|头条|时事|快讯"),
        regex_rule(
            "markets",
            en_words(
                r"stock\sprices?|share\sprices?|stock\smarket|market\sprices?|exchange\srates?"
                r"|(?:bitcoin|btc|crypto|gold|oil|gas)\sprices?|price\sof\s(?:bitcoin|gold|oil|gas)"
            )
            + r"|股价|股票价格|汇率|行情|币价|金价|油价|大盘",
            unless=_HOW_RATES_WORK,
        ),
        regex_rule(
            "weather",
            # not weather as a policy's condition: "refund if a flight is cancelled because
            # of bad weather", "weather-related delays", 因天气原因 (session 48's hunt)
            en_words(
                r"(?<!bad\s)(?<!severe\s)(?<!extreme\s)(?<!inclement\s)(?<!poor\s)"
                r"(?<!adverse\s)(?<!to\s)(?<!because\sof\s)weather(?![\s-]related|\sconditions\spermit)"
                r"|forecast|temperature\soutside|is\sit\s(?:raining|snowing)"
            )
            + r"|天气(?!原因|因素)|气温|预报|下雨吗",
        ),
        regex_rule(
            "clock",
            en_words(
                r"what\stime\s(?:is\sit|it\sis)"
                + r"|what(?:'s|\sis)\sthe\s(?:current\s)?time"
                + _NOT_CLOCK
                + r"|(?:tell|give|show)\s(?:me\s)?(?:what\s)?the\s(?:current\s)?time"
                + _NOT_CLOCK
                + r"|current\stime"
                r"|time\sfor\sanother\scity|what\sday\sis\s(?:it|today)|is\sit\s(?:after|before)\s(?:noon|midnight)"
                r"|o'?\s?clock\syet|what'?s\s(?:the\sdate|today'?s\sdate)|today'?s\sdate"
            )
            + r"|几点了|几点钟了|今天几号|今天星期几|今天礼拜几",
        ),
        regex_rule(
            "traffic", en_words(r"traffic|live\sscores?|score\sof\sthe\sgame") + r"|路况|比分"
        ),
    ),
)


#: How a fee, a price or a conversion is worked out, with no number to work on ("How
#: are shipping costs calculated?", 运费怎么计算): one answer for everyone, a policy or a
#: formula, not a result computed from the question's numbers. Only the keyword rule
#: yields to it; any digit in the text keeps the rule on ("How is 15% of 200 calculated").
_METHOD_QUESTION = re.compile(
    r"^(?!.*\d)(?=.*(?:"
    r"\bhow\s(?:is|are|was|were)\b.*\b(?:calculated|computed)\b"
    r"|\b(?:explain|tell\sme|know)\show\b.*\b(?:is|are)\s(?:calculated|computed)\b"
    r"|\bhow\s(?:do|does|would|should|can)\s(?:you|we|they|one|it|i)\s(?:calculate|compute)\b"
    r"|\b(?:calculation|computation)\s(?:method|formula|rules?)\b"
    r"|(?:怎么|如何|怎样|是怎么)(?:计算|算|换算)|计算(?:方式|方法|规则|公式)"
    r"|(?:根据|按照?)(?:什么|哪些|哪个)(?:规则|标准|方式)?(?:来)?计算"
    r"))",
    NOCASE | re.DOTALL,
)


#: What "convert X to Y" converts when it asks a computation: a unit or a currency, not
#: a file, a format or an account ("convert PDF to Word", "convert my card to a
#: virtual one": how-to questions, one answer for everyone).
_CONVERTED = rf"{UNIT_WORDS}|{CURRENCY.pattern}"


NUMERIC_COMPUTATION = Guard(
    "numeric_computation",
    "answers that are computed from the numbers in the question",
    (
        regex_rule(
            "keyword",
            en_words(
                r"calculat(?:e|es|ed|ing|ion|or)|comput(?:e|es|ed|ing|ation)|evaluate"
                # not "solve a problem with my card" (session 46's review: 6 BANKING77)
                r"|solve(?![^\d]*$)|solve(?!\s(?:(?:a|an|the|my|this|that|your|our|these|those)\s)?"
                r"(?:\w+\s)?(?:problems?|issues?|it)\b)"
                r"|square\sroot|cube\sroot|factorial|to\sthe\spower\sof|squared|cubed"
            )
            + r"|计算|算一下|算算|帮我算|等于多少|等于几|平方根|换算|多少倍",
            unless=_METHOD_QUESTION,
        ),
        regex_rule(
            "expression",
            # operators: + * ** × ÷ ^ = and the dots and minus sign of Unicode (· ⋅ ∗ −);
            # a hyphen, en dash or slash only spaced ("8 - 3"; "5-10 days" is a range),
            # "x" only spaced ("3 x 4"; "3x4" is a size); a root sign before a number
            rf"\d\s*(?:[+*×÷^=·⋅∗\u2212]|\*\*)\s*\d|\d\s+[-/\u2013]\s+\d|\d\s+[x×]\s+\d|[√∛]\s*\d"
            # "what is 8-3?", "what is 12/4?", "what is 3x4?": when it is all the question asks
            rf"|{A}(?:what\s?is|what'?s|how\smuch\sis)\s\d+(?:\.\d+)?\s?[-\u2013/x]\s?\d+(?:\.\d+)?\s*(?:[?=!.]|$)"
            rf"|{_NUM}\s*(?:times|multiplied\sby|divided\sby|plus|minus|over){Z}\s*{_NUM}"
            rf"|{_NUM}\s*(?:加上?|减去?|乘以?|除以)\s*{_NUM}",
        ),
        regex_rule(
            "operation",
            rf"{A}(?:divide|multiply)\s{_NUM}\s(?:by|into|with){Z}|{A}subtract\s{_NUM}\sfrom"
            rf"|{A}add\s{_NUM}\s(?:and|to|plus)\s{_NUM}|{A}how\smany\stimes\scan\s{_NUM}"
            rf"|{_NUM}\s*(?:%|percent)\soff|{A}(?:what\s(?:was|is)\smy\stotal|average\sprice)"
            rf"|{A}(?:conversion\sbetween|convert\s(?:(?:{_CONVERTED})\s(?:to|into)\s"
            rf"|[a-z]+\s(?:to|into)\s(?:[a-z]+\s)?(?:{_CONVERTED}){Z}))"
            # "how many ounces in 3 cups" is computed; "… in a cup", "calories in a banana"
            # are one fact for everyone (session 47; before, refused as computations), but
            # not a currency's worth ("how many pesos in one dollar": today's rate)
            rf"|{A}how\smany\s[a-z]+\s(?:is|make|will\smake|are\sin|in)\s(?!one{Z}){_NUM}{Z}"
            rf"|{A}how\smany\s(?:[a-z]+\s)?(?:{CURRENCY.pattern})\s(?:is|are|make|will\smake"
            rf"|are\sin|in|for|to)\s(?:a|an|one|{_NUM}){Z}"
            r"|\bmath\s(?:problems?|equations?|questions?)|\bequations?\b",
        ),
        regex_rule(
            "percent_of",
            rf"{_NUM}\s*(?:%|percent|per\scent)\s+of\s+[$€£¥]?\s?{_NUM}|百分之\S{{1,4}}是多少",
        ),
        regex_rule(
            "how_much_is",
            rf"{A}(?:how\smuch|what)\s(?:is|are|'s)\s[$€£¥]?{_NUM}\s*(?:[a-z]+\s)?(?:in|to){Z}"
            rf"|{A}(?:sum|product|average|mean|total)\sof\s{_NUM}|{A}convert\s{_NUM}",
        ),
    ),
)


GUARDS: dict[str, Guard] = {
    g.name: g
    for g in (TIME_SENSITIVE, PERSONALIZED, NUMERIC_COMPUTATION, HIGH_RISK, CODE_GENERATION)
}


def check_guard_names(names: Collection[str]) -> tuple[str, ...]:
    """The given names in ``GUARDS`` order; unknown names raise ``UnknownGuardError``."""
    if isinstance(names, str):
        names = (names,)
    unknown = sorted(set(names) - GUARDS.keys())
    if unknown:
        raise UnknownGuardError(
            f"unknown guard(s) {', '.join(map(repr, unknown))}; known: {', '.join(GUARDS)}"
        )
    return tuple(name for name in GUARDS if name in names)


def first_guard(text: object, names: Collection[str]) -> GuardMatch | None:
    """The first guard among ``names`` (checked in ``GUARDS`` order, so the
    result does not depend on the collection's order) that fires on ``text``."""
    selected = check_guard_names(names)
    if not selected:
        return None
    prepared = prepare(text)
    for name in selected:
        match = GUARDS[name]._check_prepared(prepared)
        if match is not None:
            return match
    return None
