"""The ``personalized`` guard (seed 003: 强个性化, 用户私有数据，答案因人而异).

Two people asking the same words need different answers only when the answer
depends on the asker's own data. "my" alone does not make that true: "How do I
update my billing address?" has one answer for everyone. So the rules look for
a question about the *value or state* of the asker's records, or a request to act
on them, and a procedural frame ("how do I", "can I", "如何", "怎么") switches
the noun rules off. Measured against hand-labelled BANKING77/CLINC150 intents by
bench/guard_eval.py (validators/data/intent_labels.json).
"""

from __future__ import annotations

import re

from validators.guard_base import NOCASE, A, Guard, GuardRule, Z, en_words

#: Records whose value only the asker's account holds.
_MY_VALUE = (
    r"balance|credit\sscore|credit\slimit|(?:account|routing)\snumbers?|income|salary"
    r"|minimum\spayment|min\spayment|rewards?(?:\spoints)?|points|pto|vacation\sdays|w-?2"
    r"|transactions?|transaction\shistory|statements?|spending|bills?|schedule|calendar"
    r"|reminders?|alarms?|meetings?|(?:shopping|to-?do|todo)\slists?|credit\scard\sbill"
    r"|insurance(?:\splan|\sbenefits)?|interest\srate|expiration\sdate|payday|pay\sday"
    r"|(?:next\s)?pay\s?checks?|credit\srating|reservations?|vacation\srequest|location"
    r"|tracking\s(?:number|code|id)|renewal\sdate|due\sdate"
)
#: The asker's items whose state (arrived, pending, declined…) is the answer.
_MY_ITEM = (
    r"card|cards|transfers?|payments?|top[\s-]?ups?|refunds?|orders?|packages?|parcels?"
    r"|deliver(?:y|ies)|withdrawals?|deposits?|transactions?|money|funds|cash|cheques?"
    r"|checks?|balance|account|application|bill|reservation|booking|claim|salary|paycheck"
    r"|subscriptions?|membership|plan"
)
_STATE_VERB = (
    r"(?:has|have|hasn't|haven't|hasnt|havent|is|isn't|isnt|was|wasn't|wasnt|were|did|didn't"
    r"|didnt|does|doesn't|doesnt|got|keeps|still|never|won't|wont|will|can't|cant|hasn't\syet)"
)
#: A request for the procedure (same answer for everyone), not for the asker's data.
_PROCEDURAL = re.compile(
    en_words(
        r"how\s(?:do|can|could|would|should|will|does|might|may)\s(?:i|we|you|one|someone)"
        r"|how\sto|how\sis\sit\s(?:done|possible)|is\sit\spossible|can\si|could\si|may\si"
        r"|where\s(?:can|do|should|could)\si|what\s(?:do|should|would)\si\s(?:need|do|have)"
        r"|what\s(?:is|are)\sthe\s(?:steps?|process|procedure|way|requirements?|options?)"
        r"|what\s(?:steps?|documents?)|what\shappens|steps\sto|i\s(?:want|need|would\slike)\sto"
        r"|i'?d\slike\sto|do\syou\s(?:support|accept|offer|allow|charge)|is\sthere\sa\s(?:fee|charge|limit)"
        r"|tell\sme\show|help\sme\s(?:understand|figure)|show\sme\show|explain"
    )
    # 怎么 also means "why" (我的订单怎么还没到): only the how-to reading counts.
    + r"|如何|怎么(?!还|没|回事|不)|怎样|怎麼|能否|可以吗|可不可以"
    r"|在哪里?(?:修改|更改|设置|查询|查看)|步骤|流程",
    NOCASE,
)
#: Commands that act on the asker's account, bookings, lists or devices.
_COMMAND = (
    r"^(?:(?:please|hey|hi|ok|okay|so|now|yes|alright)[\s,!]+)*"
    r"(?:(?:can|could|would|will)\syou\s(?:please\s)?|i\s(?:want|need)\syou\sto\s|i'?d\slike\syou\sto\s"
    r"|please\s)?"
    r"(?:set\s(?:\w+\s){0,3}?(?:alarm|timer|reminder)s?|add|remove|delete|put|book|reserve|order"
    r"|pay|transfer|send|text|message|call|dial|schedule|remind|freeze|share|sync|play|skip"
    r"|turn\s(?:on|off|up|down)|switch|dim|lock|unlock|rename|confirm|rent|cancel\s(?:my|the|a|an)"
    r"|change\s(?:the|your|to|mode)|whisper|speak|get\sme\s(?:an?\s)?(?:uber|lyft|ride|car|taxi|cab)"
    r"|wake\sme|make\s(?:a|an)\s(?:new\s)?(?:alarm|reminder|reservation)|start\s(?:the|a)\stimer"
    r"|(?:re)?order\sme|activate|deactivate|enable|disable|use\s(?:a|the)\sdifferent|tell\s\w+\s(?:and\s\w+\s)?where"
    r"|take\s[$€£]?\d|move\s[$€£]?\d|read\s(?:me\s)?(?:my|the)\s(?:reminders?|list|calendar|schedule)"
    r"|(?:show|read|list)\s(?:off\s)?(?:me\s|to\sme\s)?(?:all\s)?(?:the\s|my\s)?(?:last\s\w+\s)?"
    r"(?:transactions?|purchases?|payments?|spending|charges?))" + Z
)


#: Troubleshooting a lost, stolen, damaged or expiring card: the same steps for everyone.
#: Also (session 46's review) a card an ATM kept or someone else used. (A how-to or a
#: "what happens if" clause is not read here: it kept "Is my account frozen? How do I
#: unfreeze it?" from being refused for its first question.)
_TROUBLE = re.compile(
    en_words(
        r"lost|stolen|missing|damaged|broken|expire[sd]?|expiring|expiration|not\sworking"
        r"|(?:won't|wont|doesn't|doesnt|isn't|isnt|is\snot|does\snot)\s(?:work|working)"
        r"|swallowed|stuck\sin|trapped|retained|kept\sby|melted|cloned|skimmed|hacked"
        r"|compromised|(?:used|using|uses)\s(?:\w+\s){0,2}?without\smy\s(?:permission|consent"
        r"|knowledge)"
    ),
    NOCASE,
)
#: What went wrong with one of the asker's transactions (its state is the answer).
_PROBLEM = (
    r"pending|declined|rejected|failed|reverted|not\s(?:show(?:ing|n)?|arrived?|received|gone"
    r"|(?:been\s)?credited|recogni[sz]ed?|updated)|still\swaiting|hasn't\s(?:arrived|come|shown)"
    r"|haven't\s(?:received|got(?:ten)?)|don't\s(?:see|recogni[sz]e)|can't\ssee|unauthori[sz]ed"
    r"|didn't\s(?:go\sthrough|arrive|make)|wrong\s(?:amount|exchange\srate|rate)"
)


#: "What happens if my card is declined?", "What do I do if my transfer is rejected?", "If
#: my card gets frozen, …": a state supposed, whose answer is the same procedure for
#: everyone; read in the clause itself, so "Is my account frozen? What happens then?"
#: and "Can you check if my transfer was received?" stay personal (session 47).
_NOT_SUPPOSED = (
    r"(?<!happens\sif\s)(?<!happen\sif\s)(?<!what\sif\s)(?<!\sdo\sif\s)(?<!^if\s)"
    r"(?<![.?!,;]\sif\s)(?<!in\scase\s)(?<!suppose\s)(?<!supposing\s)"
)


def _personal(
    name: str, pattern: str, *, unless: re.Pattern[str] | None = _PROCEDURAL
) -> GuardRule:
    return GuardRule(name, re.compile(pattern, NOCASE), unless=unless)


PERSONALIZED = Guard(
    "personalized",
    "answers that depend on the asker's own data: the value or state of their records "
    "(balance, my order, my transactions), actions on them, PII in the text",
    (
        # identifiers count as PII when they hold 5+ digits or are a masked reference
        # ("*1234"); short codes such as "w2" or "dl123" name forms and flights, not people.
        GuardRule("pii", entity_kinds=frozenset({"email", "phone", "identifier"})),
        _personal(
            "my_status",
            rf"{A}where(?:'s|\sis|\sare|s)\s(?:all\s)?my\s(?:[a-z'-]+\s)?(?:{_MY_ITEM}){Z}"
            rf"|{A}(?:why\s|when\s|how\scome\s)?{_STATE_VERB}\s(?:\w+\s){{0,2}}?my\s(?:[a-z'-]+\s)?(?:{_MY_ITEM}){Z}\s\w+"
            rf"|{_NOT_SUPPOSED}{A}my\s(?:[a-z'-]+\s)?(?:{_MY_ITEM})\s{_STATE_VERB}{Z}"
            rf"|{A}(?:status|state)\sof\smy{Z}",
            unless=_TROUBLE,
        ),
        _personal(
            "own_transaction",
            # "What if my payment is pending for a week?": a state supposed, in its clause
            # (session 48; not global, as "what happens" is: "What is my balance? What if
            # I spend $50?" stays refused, a review)
            rf"(?<!what\sif\smy\s)(?<!what\sif\sa\s)(?<!what\sif\sthe\s)(?<!what\sif\sour\s)"
            rf"{A}(?:{_MY_ITEM}){Z}[^.?!]{{0,40}}?{A}(?:{_PROBLEM}){Z}"
            rf"|{A}(?:{_PROBLEM}){Z}[^.?!]{{0,40}}?{A}(?:{_MY_ITEM}){Z}",
        ),
        _personal(
            "my_value",
            rf"{A}my\s(?:[\w'&.-]+\s){{0,4}}?(?:{_MY_VALUE}){Z}"
            rf"|{A}(?:track|find|locate|check\son)\smy\s(?:[a-z'-]+\s)?(?:{_MY_ITEM}){Z}"
            rf"|{A}(?:limit|rewards?|balance)\s(?:for|on|of|in)\smy{Z}",
        ),
        _personal(
            "first_person",
            en_words(
                r"how\smuch\s(?:money\s)?(?:do|did)\si\s(?:have|owe|spend|spent|earn|make|get)"
                r"|how\smany\s(?:[a-z-]+\s){0,4}?(?:do|did|have)\si\s(?:still\s|now\s)?"
                r"(?:have|use|used|take|took|taken|get|accrued|left)"
                r"|how\smuch\s(?:[a-z-]+\s){0,3}?(?:have|did)\si\s(?:spent|spend|taken|take|used|use"
                r"|earned|made|paid)|have\si\sbeen\sspending|how\smuch\s(?:money\s)?i\s(?:have|owe)"
                r"|(?:what|which)\s(?:transactions?|purchases?|payments?|days)\s(?:did|have)\si"
                r"|(?:have|did)\si\s(?:\w+\s)?(?:accrued|used|taken|spent)|i've\s(?:taken|used|spent)"
                r"|(?:when|what\sday)\s(?:am|was)\si\s(?:last\s)?paid|when\si\swas\s(?:last\s)?paid"
                r"|(?:the|my)\s(?:[\w&'-]+\s){0,3}?bill(?:'s)?\s(?:is\s)?due|bill'?s\sminimum"
                r"|minimum\s(?:payment\s)?(?:is\s)?(?:on|for)\s(?:the|my)"
                r"|due\son\s(?:the|my)\s(?:[\w&'-]+\s){0,2}?bill"
                r"|do\si\shave\s(?:any|enough|a|an)|did\si\s(?:spend|pay|earn|get\spaid)"
                r"|what\sdo\si\sowe|when\s(?:do|will)\si\s(?:next\s)?get\spaid|i\sget\spaid\snext"
                r"|i(?:'ll|\swill)\sreceive\sa\spaycheck|i\slast\sgo(?:t)?\spaid"
                r"|am\si\s(?:eligible|approved)|(?:have|has)\s(?:i|my\s\w+)\sbeen\sapproved"
                r"|is\smy\s\w+\s(?:request\s)?approved|is\sthere\senough\s(?:money\s)?in\smy"
                r"|(?:do|will|did)\si\s(?:next\s)?get\spaid|was\si\s(?:last\s)?paid"
                r"|what\s(?:do|did)\si\shave\s(?:to\sdo|on|scheduled|planned|going\son)"
                r"|do\si\shave\s(?:anything|any\s(?:meetings?|plans?|events?))|what(?:'s|\sis)\son\smy"
                r"|how\smany\s\w+\s(?:am|do)\si\s(?:have|attending)"
                r"|charged\s(?:me\s)?(?:twice|two\stimes|double|more\sthan\sonce)|double[\s-]charged"
                r"|duplicate\s(?:charges?|payments?|transactions?)"
                r"|what(?:'s|\sis)\smy\sname"
                # session 45's review: each was stored and served to the tenant's others
                r"|(?:what|which)\s(?:plan|tier|package|subscription)\s(?:am\si|are\swe)\son"
                r"|(?:did|have|has)\syou\s(?:guys\s)?(?:receive[d]?|get|got(?:ten)?|process(?:ed)?)"
                r"\smy\s(?:[a-z-]+\s)?(?:payment|order|application|email|message|documents?"
                r"|request|form|claim|return|refund|deposit|transfer|cheque|check)s?"
            ),
            unless=None,
        ),
        _personal(
            "command",
            _COMMAND + r"|(?:i\s(?:need|want|would\slike)|i'?d\slike)(?:\syou\sto)?\s"
            r"(?:set\s|create\s|make\s)?(?:an?\s|the\s)?(?:[\w-]+\s){0,2}?(?:alarm|timer|reminder)s?(?![a-z])",
            unless=None,
        ),
        _personal(
            "my_data_zh",
            r"我的.{0,4}?(?:账户|帐户|账号|帐号|订单|余额|卡|快递|包裹|工资|贷款|积分|预约|交易|账单|额度|信用分|保单|航班|钱|退款|转账"
            r"|会员|订阅|套餐|物流)"
            r".{0,6}?(?:到哪|在哪|是多少|多少|还没|没有|为什么|怎么还|被|了吗|吗|状态|显示"
            r"|什么时候|何时|啥时候|哪天)"
            r"|我(?:还)?有多少(?:钱|余额|积分)|我(?:还)?欠|我的(?:余额|积分|额度|信用分)"
            # session 45's review: a charge twice, an order to cancel, in Chinese
            r"|扣了我|重复扣|扣了两次|帮我(?:取消|退订|退款|转账|预订)",
        ),
    ),
)
