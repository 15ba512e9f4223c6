"""The ``high_risk`` guard (seed 003: 高风险决策, 医疗、法律建议): *advice* about
someone's situation.

"What are the side effects of aspirin?" is an encyclopedia question with one
answer for everyone; "How much aspirin should I take for my headache?" is advice
about one person. A medical or legal rule fires only when its term meets a marker
of someone's situation (first person, a relative, "should I", "is it safe to
take"); in Chinese, where the subject is often dropped, an advice question word
(怎么办, 该不该, 吃多少) counts as the marker. Financial advice is advice by its
wording ("should I invest").
"""

from __future__ import annotations

import re

from validators.guard_base import NOCASE, A, Guard, GuardRule, Z, en_words, regex_rule

_MEDICAL_EN = (
    r"dosages?|doses?|overdos(?:e|ed|ing)|mg|milligrams?|symptoms?|diagnos(?:e|is|ed|es)"
    r"|treat(?:ments?|ed|ing)?|side\seffects?|prescriptions?|prescrib(?:e|ed)|medications?"
    r"|medicines?|meds|pills?|drug\sinteractions?|antibiotics?|ibuprofen|acetaminophen"
    r"|paracetamol|tylenol|aspirin|advil|insulin|pregnan(?:t|cy)|cancer|diabetes|infections?"
    r"|diseases?|fever|allerg(?:y|ies|ic)|pain|aches?|headaches?|migraines?|rash|cough"
    r"|injur(?:y|ed)|bleeding|vaccin(?:e|es|ated|ation|ations)|immuni[sz](?:ation|ations|ed)"
    r"|shots?|doctor|hospital"
    r"|blood\spressure|flu|covid|infected|swollen|vomit(?:ing)?|nause(?:a|ous)"
)
_LEGAL_EN = (
    r"lawsuits?|sue|suing|sued|legal(?:ly)?|illegal|lawyers?|attorneys?|contract\sdispute"
    r"|breach\sof\scontract|custody|divorce|liab(?:le|ility)|(?<!food\s)court|prosecut(?:e|ed|ion)"
    r"|criminal|copyright|evict(?:ion|ed)?|tenant\srights|wrongful(?:ly)?\s(?:fired|dismissal)"
    r"|arrested|fined"
)
_SELF_EN = (
    # "us" in lower case only: "the US" is a country ("legal drinking age in the US"
    # was advice about someone's situation), the pattern is compiled without case
    r"i|i'm|im|i've|i'd|me|my|mine|myself|we|our|(?-i:us|Us)"
    r"|(?:my|our)\s(?:child|son|daughter|wife|husband|partner|mom|mother|dad|father|baby|kid"
    r"|kids|parents?|boss|employer|neighbou?r)"
    r"|is\sit\s(?:safe|ok|okay|dangerous|bad|harmful)|(?:should|can|could|must)\s(?:he|she|they)"
    # a dose for a child, a drug in pregnancy: advice about a group whose dose differs
    # (served in session 45's review: "What dose of Tylenol is safe for a child?")
    r"|pregnant\s(?:women|woman|people|mothers?)|(?:while|when)\s(?:pregnant|breastfeeding|nursing)"
    r"|(?:safe\s)?for\s(?:a\s|an\s)?(?:child|children|kids?|bab(?:y|ies)|toddlers?|infants?)"
)


class _Both:
    """A term and a situation marker anywhere in one text, one before the other, or the
    Chinese pattern: the matched term (or the Chinese match). Read as two scans, not as
    one regex: a lookahead for the marker tried after every term took quadratic time (a
    text of 20 kB of "on my a " took 7 s, 100 kB minutes: the diff review of session 50)."""

    def __init__(self, terms: str, zh: str) -> None:
        self.terms = re.compile(rf"{A}(?:{terms}){Z}", NOCASE)
        self.selves = re.compile(rf"{A}(?:{_SELF_EN}){Z}", NOCASE)
        self.zh = re.compile(zh, NOCASE | re.DOTALL)

    def search(self, string: str, /) -> re.Match[str] | None:
        terms = list(self.terms.finditer(string))
        if terms:
            selves = list(self.selves.finditer(string))
            if selves:
                if terms[0].end() <= selves[-1].start():  # a term, then a marker
                    return terms[0]
                after = [t for t in terms if t.start() >= selves[0].end()]  # a marker first
                if after:
                    return after[0]
        return self.zh.search(string)


def _advice(name: str, terms: str, zh: str, unless: re.Pattern[str] | None = None) -> GuardRule:
    """``terms`` next to a first-person or situation marker (either order), or ``zh``."""
    return GuardRule(name, _Both(terms, zh), unless=unless)


#: Pharmacy and clinic administration: refilling, picking up or transferring a
#: prescription, booking or seeing a doctor (about nothing named), paying or claiming a
#: bill (医保码, 结算, 挂号, 报销): the same steps for everyone, no advice about a body
#: (session 46's review: 83 of 719 health-administration topic questions were refused).
#: Not when a dose, a symptom, a side effect or whether to take something is asked too.
_HEALTH_ADMIN = re.compile(
    r"^(?!.*(?:\d\s?mg\b|\b(?:dos(?:e|es|age|ages)|overdos\w*|mg|milligrams?|symptoms?"
    r"|side\seffects?|safe|ok|okay|pregnan\w*|breastfeed\w*|diagnos\w*|alcohol|drink\w*|pain"
    r"|fever|allerg\w*|rash|cough\w*|chest|bleed\w*|vomit\w*|nause\w*|headaches?|migraines?"
    r"|infect\w*|swollen|sick|hurts?|emergency|er|urgent|should\s(?:i|we)\s(?:go|see|take)"
    r"|suicid\w*|depress\w*|anxi\w*|lumps?|wounds?|uti|injur\w*|bitten|bites?"
    r"|(?:should|can|could|must)\s(?:i|we|he|she|they|my\s\w+)\s(?:take|stop|use|give|mix))\b"
    r"|剂量|吃几|吃多少|副作用|症状|发烧|发热|过敏|疼|痛|咳|吐|孕|哺乳|还要吃|能不能吃|可以吃|该吃|急诊))"
    r"(?:.*\b(?:refill\w*|pick(?:\s|-)?(?:up|it\sup)|transfer\w*|renew\w*|deliver\w*|ready"
    r"|book\w*|schedule\w*|reschedul\w*|appointments?|insurance|copays?|bill(?:s|ing)?"
    r"|invoices?|records?|portal|receipts?|reimburse\w*|claims?"
    # how or where to see one, about nothing said (session 50's misfire hunt: "How do
    # I see a doctor on the weekend?" was never cached; "… about my anxiety" is advice)
    r"|(?:how|where|when)\s(?:do|can|could)\s(?:i|we)\ssee\s(?:a\s)?(?:doctor|gp|physician|nurse)"
    r"(?!\s(?:about|for|after|because|regarding|with|if|since|due))(?=\s(?:on|at|in|near|today"
    r"|tonight|tomorrow|this|over|during|online|without|quickly|fast|soon)\b|\s*[?.!]?\s*$))\b"
    r"|.*(?:医保码|医保卡|医保|结算|报销|挂号|预约|转诊|缴费|发票|取药|病历|出院手续|理赔))",
    NOCASE | re.DOTALL,
)


_ZH_ADVICE = (
    r"怎么办|该怎么|怎么处理|应该|该不该|要不要|能不能|可以吗|可不可以|需要(?:看|去|吃)"
    r"|吃几|吃多少|几次|多少量"
)
_ZH_SELF = r"我|我的|我们|孩子|宝宝|老人|这个药|这种药|这样|这么做|孕妇|哺乳期|儿童|小孩|婴儿"
_ZH_MEDICAL = (
    r"药|剂量|症状|诊断|治疗|副作用|处方|疾病|生病|病情|发烧|头痛|头疼|疼痛|怀孕|癌|疫苗"
    r"|医生|医院|过敏|咳嗽|布洛芬|对乙酰氨基酚|扑热息痛|阿司匹林|泰诺|抗生素|头孢"
)
# not 房东 alone ("房东联系不上怎么办" is about a stay, no dispute: session 46's review);
# a landlord refusing, raising or keeping something is a dispute
_ZH_LEGAL = (
    r"合同纠纷|起诉|律师|合法|违法|法律|诉讼|法院|判决|离婚|赔偿|侵权|仲裁|被辞退|维权"
    r"|押金纠纷|不退押金|房东(?=[^。？！?!]{0,8}(?:不退|不给|不修|不管|不肯|不配合|不让|拒绝|拒不"
    r"|涨租|涨房租|加租|扣押金|扣钱|押金|赶|违约|威胁|收回|扔|换锁|断水|断电|搬走|矛盾|纠纷))"
    r"|(?:和|跟|与)房东[^。？！?!]{0,6}(?:矛盾|纠纷|吵)"
)


def _zh_advice(terms: str) -> str:
    # The term and a marker of someone's situation, in either order, in one sentence.
    near = r"[^。？！?!]{0,12}?"
    marker = rf"(?:{_ZH_ADVICE}|{_ZH_SELF})"
    return rf"(?:{terms}){near}{marker}|{marker}{near}(?:{terms})"


HIGH_RISK = Guard(
    "high_risk",
    "medical, legal and financial advice about someone's own situation, where a wrong "
    "cached answer does harm (encyclopedic facts such as side effects of a drug pass)",
    (
        _advice("medical", _MEDICAL_EN, _zh_advice(_ZH_MEDICAL), unless=_HEALTH_ADMIN),
        _advice("legal", _LEGAL_EN, _zh_advice(_ZH_LEGAL)),
        regex_rule(
            "financial_advice",
            en_words(
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
