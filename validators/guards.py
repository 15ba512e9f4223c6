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
* ``personalized`` (强个性化): "my account/order/balance/card…", first-person
  data questions ("how much do I owe"), 我的账户/我的订单…, and PII in the text
  (emails, phone numbers, order/account/card numbers and other identifiers).
* ``numeric_computation`` (数值敏感): calculate, compute, arithmetic expressions,
  "what is 15% of 200", 计算, 等于多少, 三乘以七.
* ``high_risk`` (高风险决策): medical (dosage, symptoms, 药, 症状), legal
  (lawsuit, is it legal, 合同纠纷) and financial advice (should I invest,
  投资建议).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from validators.entities import find_entities
from validators.errors import UnknownGuardError
from validators.numbers import EN_NUM, ZH_NUM
from validators.scan import EntitySpan
from validators.text import prepare

_I = re.IGNORECASE
_A = r"(?<![A-Za-z])"
_Z = r"(?![A-Za-z])"


def _en(words: str) -> str:
    return rf"{_A}(?:{words}){_Z}"


@dataclass(frozen=True, slots=True)
class GuardMatch:
    """Why a guard fired: the guard, the rule inside it and the matched phrase
    (``start``/``end`` index the NFKC-normalized text)."""

    guard: str
    rule: str
    phrase: str
    start: int
    end: int

    @property
    def reason(self) -> str:
        return f"guarded:{self.guard}"

    def to_dict(self) -> dict[str, Any]:
        return {"guard": self.guard, "rule": self.rule, "phrase": self.phrase,
                "start": self.start, "end": self.end}  # fmt: skip


@dataclass(frozen=True, slots=True)
class GuardRule:
    """A regex rule, or (``entity_kinds`` set) a rule that fires when the
    entity extractor finds one of those kinds in the text."""

    name: str
    pattern: re.Pattern[str] | None = None
    entity_kinds: frozenset[str] = frozenset()

    def find(self, text: str) -> tuple[str, int, int] | None:
        if self.pattern is not None:
            m = self.pattern.search(text)
            return None if m is None else (m.group(), m.start(), m.end())
        for span in find_entities(text):
            if span.kind in self.entity_kinds and _is_pii(span):
                return span.text, span.start, span.end
        return None


def _is_pii(span: EntitySpan) -> bool:
    if span.kind != "identifier":
        return True
    return span.value.startswith("*") or sum(ch.isdigit() for ch in span.value) >= 5


@dataclass(frozen=True, slots=True)
class Guard:
    name: str
    description: str
    rules: tuple[GuardRule, ...]

    def check(self, text: object) -> GuardMatch | None:
        """The first rule (in order) that fires on ``text``, or None.
        Raises ``InvalidTextError`` for bad input."""
        return self._check_prepared(prepare(text))

    def _check_prepared(self, text: str) -> GuardMatch | None:
        for rule in self.rules:
            found = rule.find(text)
            if found is not None:
                return GuardMatch(self.name, rule.name, *found)
        return None


def _rule(name: str, pattern: str) -> GuardRule:
    return GuardRule(name, re.compile(pattern, _I))


_NUM = rf"(?:(?<![\d.,])\d+(?:[.,]\d+)*|{EN_NUM}|{ZH_NUM})"
_INFO = (
    r"price|prices|rate|rates|value|score|scores|weather|temperature|news|status|traffic|stock"
    r"|market|queue|wait\stime|balance|time"
)

TIME_SENSITIVE = Guard(
    "time_sensitive",
    "answers that change with time: now/current/latest, news, prices and rates, weather, the clock",
    (
        _rule(
            "now",
            _en(
                r"right\snow|just\snow|as\sof\s(?:now|today)|currently|at\sthe\smoment|at\spresent"
                rf"|(?:{_INFO})\s(?:is\s|are\s)?(?:right\s)?now"
            )
            + r"|现在|目前|当前|此刻|眼下",
        ),
        _rule(
            "latest",
            _en(r"latest|newest|most\srecent|up[\s-]to[\s-]date|breaking|just\sreleased")
            + r"|最新|最近的?(?:新闻|消息|动态)",
        ),
        _rule(
            "current_value",
            _en(rf"(?:current|today'?s|live|real[\s-]?time|tonight'?s)\s(?:{_INFO})")
            + r"|实时|即时",
        ),
        _rule("news", _en(r"news|headlines?") + r"|新闻|头条|时事|快讯"),
        _rule(
            "markets",
            _en(
                r"stock\sprices?|share\sprices?|stock\smarket|market\sprices?|exchange\srates?"
                r"|(?:bitcoin|btc|crypto|gold|oil|gas)\sprices?|price\sof\s(?:bitcoin|gold|oil|gas)"
            )
            + r"|股价|股票价格|汇率|行情|币价|金价|油价|大盘",
        ),
        _rule(
            "weather",
            _en(r"weather|forecast|temperature\soutside|is\sit\s(?:raining|snowing)")
            + r"|天气|气温|预报|下雨吗",
        ),
        _rule(
            "clock",
            _en(
                r"what\stime\s(?:is\sit|it\sis)|what(?:'s|\sis)\sthe\s(?:current\s)?time"
                r"|(?:tell|give|show)\s(?:me\s)?(?:what\s)?the\s(?:current\s)?time|current\stime"
                r"|time\sfor\sanother\scity|what\sday\sis\s(?:it|today)|is\sit\s(?:after|before)\s(?:noon|midnight)"
                r"|o'?\s?clock\syet|what'?s\s(?:the\sdate|today'?s\sdate)|today'?s\sdate"
            )
            + r"|几点了|几点钟了|今天几号|今天星期几|今天礼拜几",
        ),
        _rule("traffic", _en(r"traffic|live\sscores?|score\sof\sthe\sgame") + r"|路况|比分"),
    ),
)

_MY_NOUNS = (
    r"accounts?|orders?|balances?|cards?|transactions?|payments?|statements?|bills?|packages?"
    r"|parcels?|deliver(?:y|ies)|refunds?|loans?|salary|paychecks?|credit\sscore|credit\slimit"
    r"|portfolio|bookings?|reservations?|appointments?|subscriptions?|address|profile|transfers?"
    r"|deposits?|withdrawals?|pto|insurance|polic(?:y|ies)|claims?|wallet|savings|checking|debts?"
    r"|income|taxes|rewards|points|history|spending|flights?|applications?|funds|money"
    r"|pay\s?days?|pay\s?checks?|pay\sstubs?|checks?|pay"
)
PERSONALIZED = Guard(
    "personalized",
    "answers that depend on the asker's own data: my account/order/balance/card, PII in the text",
    (
        _rule("my_data", rf"{_A}my\s(?:[a-z'-]+\s){{0,2}}?(?:{_MY_NOUNS}){_Z}"),
        _rule(
            "first_person",
            _en(
                r"how\smuch\s(?:money\s)?(?:do|did|have|can)\si|do\si\shave|did\si\s(?:spend|pay|earn|get)"
                r"|what\sdo\si\sowe|when\s(?:do|will)\si\s(?:next\s)?get\spaid|i\sget\spaid\snext"
                r"|i(?:'ll|\swill)\sreceive\sa\spaycheck|i\slast\sgo(?:t)?\spaid"
                r"|am\si\s(?:eligible|approved)"
            ),
        ),
        _rule(
            "my_data_zh",
            r"我的.{0,4}?(?:账户|帐户|账号|帐号|订单|余额|卡|快递|包裹|工资|贷款|积分|预约|交易|账单|额度|信用分|保单|地址|航班|钱)"
            r"|我(?:还)?有多少(?:钱|余额|积分)|我(?:还)?欠",
        ),
        GuardRule("pii", entity_kinds=frozenset({"email", "phone", "identifier"})),
        # identifiers count as PII when they hold 5+ digits or are a masked reference
        # ("*1234"); short codes such as "w2" or "dl123" name forms and flights, not people.
    ),
)

NUMERIC_COMPUTATION = Guard(
    "numeric_computation",
    "answers that are computed from the numbers in the question",
    (
        _rule(
            "keyword",
            _en(
                r"calculat(?:e|es|ed|ing|ion|or)|comput(?:e|es|ed|ing|ation)|solve|evaluate"
                r"|square\sroot|cube\sroot|factorial|to\sthe\spower\sof|squared|cubed"
            )
            + r"|计算|算一下|算算|帮我算|等于多少|等于几|平方根|换算|多少倍",
        ),
        _rule(
            "expression",
            rf"\d\s*[+*×÷^=]\s*\d|\d\s+[-/]\s+\d"
            rf"|{_NUM}\s*(?:times|multiplied\sby|divided\sby|plus|minus|over){_Z}\s*{_NUM}"
            rf"|{_NUM}\s*(?:加上?|减去?|乘以?|除以)\s*{_NUM}",
        ),
        _rule(
            "operation",
            rf"{_A}(?:divide|multiply)\s{_NUM}\s(?:by|into|with){_Z}|{_A}subtract\s{_NUM}\sfrom"
            rf"|{_A}add\s{_NUM}\s(?:and|to|plus)\s{_NUM}|{_A}how\smany\stimes\scan\s{_NUM}"
            rf"|{_NUM}\s*(?:%|percent)\soff|{_A}(?:what\s(?:was|is)\smy\stotal|average\sprice)"
            rf"|{_A}(?:conversion\sbetween|convert\s[a-z]+\s(?:to|into))\s"
            rf"|{_A}how\smany\s[a-z]+\s(?:is|make|will\smake|are\sin|in)\s(?:a|an|one|{_NUM}){_Z}"
            r"|\bmath\sproblems?",
        ),
        _rule(
            "percent_of",
            rf"{_NUM}\s*(?:%|percent|per\scent)\s+of\s+[$€£¥]?\s?{_NUM}|百分之\S{{1,4}}是多少",
        ),
        _rule(
            "how_much_is",
            rf"{_A}(?:how\smuch|what)\s(?:is|are|'s)\s[$€£¥]?{_NUM}\s*(?:[a-z]+\s)?(?:in|to){_Z}"
            rf"|{_A}(?:sum|product|average|mean|total)\sof\s{_NUM}|{_A}convert\s{_NUM}",
        ),
    ),
)

HIGH_RISK = Guard(
    "high_risk",
    "medical, legal and financial-advice questions where a wrong cached answer does harm",
    (
        _rule(
            "medical",
            _en(
                r"dosages?|doses?|overdos(?:e|ed|ing)|mg|milligrams?|symptoms?|diagnos(?:e|is|ed|es)"
                r"|treatments?|side\seffects?|prescriptions?|prescrib(?:e|ed)|medications?|medicines?"
                r"|drug\sinteractions?|antibiotics?|ibuprofen|acetaminophen|paracetamol|tylenol|aspirin"
                r"|insulin|pregnan(?:t|cy)|cancer|diabetes|infections?|diseases?|fever|allergic"
                r"|chest\spain|vaccin(?:e|es|ation|ations)|is\sit\ssafe\sto\stake"
                r"|(?:required|any|more|flu|covid|booster|what)\sshots?"
                r"|shots?\s(?:do\si|i\sneed|needed|required)"
            )
            + r"|药|剂量|症状|诊断|治疗|副作用|处方|疾病|生病|病情|发烧|头痛"
            + r"|疼痛|怀孕|癌|疫苗|医生|医院",
        ),
        _rule(
            "legal",
            _en(
                r"lawsuits?|sue|suing|sued|is\sit\s(?:legal|illegal)|legally|illegal|lawyers?|attorneys?"
                r"|legal\sadvice|contract\sdispute|breach\sof\scontract|custody|divorce|liab(?:le|ility)"
                r"|(?<!food\s)court|prosecut(?:e|ed|ion)|criminal|copyright\sinfringement|evict(?:ion|ed)?"
            )
            + r"|合同纠纷|起诉|律师|合法|违法|法律|诉讼|法院|判决|离婚|赔偿|侵权|仲裁",
        ),
        _rule(
            "financial_advice",
            _en(
                r"should\si\s(?:invest|buy|sell|put\s(?:my\s)?money|hold)"
                r"|(?:investment|investing|financial|retirement|portfolio)\sadvice"
                r"|which\s(?:stocks?|shares?|funds?|crypto\w*|etfs?|coins?)\s(?:should|to|are)"
                r"|is\s(?:it\s|now\s)?a\sgood\s(?:time|idea)\sto\s(?:buy|sell|invest)"
                r"|good\sinvestments?|best\s(?:stocks?|investments?|funds?|etfs?)\sto|stock\stips?"
            )
            + r"|投资建议|理财建议|该不该买|要不要买|买哪只|哪只股票|买什么股票"
            + r"|基金推荐|推荐.{0,4}(?:股票|基金)|值得投资",
        ),
    ),
)

GUARDS: dict[str, Guard] = {
    g.name: g for g in (TIME_SENSITIVE, PERSONALIZED, NUMERIC_COMPUTATION, HIGH_RISK)
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
