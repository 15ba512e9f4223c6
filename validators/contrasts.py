"""Mutually exclusive qualifiers: the contrast sets ``validators.polarity`` reads.

"How does a buyer get a refund?" and "How does a seller get a refund?", "the maximum
daily dose of ibuprofen for adults" and "… for children", "checked baggage for economy
passengers" and "… business class passengers": one word names *who* or *which kind*,
the rest is a template the embedder and the pair verifier both read as the same
question (a review of session 38 found such pairs served at verifier scores of
0.985-0.996, where a synonym swap such as change / update scored 0.86). Each set
names the members of one closed dimension: parties of a transaction or relationship,
the population a dose or a price is for, a customer's tier, a travel class, a room, a
jurisdiction's level, a channel. Its members become ``antonym``-style pairs
(``contrast_<set>_<a>_<b>``), which refuse only when **both** texts name members and
they differ: a text naming none ("How do I get a refund?") or the same member in
other words (kid / child) is never refused, and one naming two members ("between a
buyer and a seller") contrasts with nothing. So the sets only have to be right about
what excludes what, and stay small.

Words that are mostly something else are anchored or left out: "business" only as a
travel class, "state" only before law / tax / court, "host" and "guest" only as
people (not a web host), "economy" only without "premium" before it. Chinese members
are whole words that do not occur inside others in FAQ text.

Two members in one text are read in order too (``order_<set>:<first>><second>``):
"Can a guest check in without the host present?" and "Can a host check in without
the guest present?" name the same two and differ only in who does what (served at
verifier 0.986 in the review). Two texts that both order one set's members must order
them alike; a passive ("… reset by the instructor", 被 / 由) is not read, since it
turns the order round without changing the meaning.
"""

from __future__ import annotations

import re
from collections.abc import Set
from itertools import combinations

_A = r"(?<![A-Za-z])"
_Z = r"(?![A-Za-z])"


def _en(words: str) -> str:
    return rf"{_A}(?:{words}){_Z}"


#: (set name, ((member name, English regex, Chinese alternatives), ...))
CONTRAST_SETS: tuple[tuple[str, tuple[tuple[str, str, str], ...]], ...] = (
    ("trade", (("buyer", r"buyers?", "买家|买方"), ("seller", r"sellers?|vendors?", "卖家|卖方"))),
    (
        "lease",
        (
            ("landlord", r"landlords?|landlad(?:y|ies)", "房东"),
            ("tenant", r"tenants?|renters?", "租客|租户"),
        ),
    ),
    (
        "work",
        (
            ("employer", r"employers?", "雇主|老板"),
            ("employee", r"employees?|staff\smembers?", "员工|雇员|职员"),
        ),
    ),
    ("stay", (("host", r"hosts?(?!\sname|ing|ed)", "房主"), ("guest", r"guests?", "房客"))),
    (
        "ride",
        (
            ("driver", r"drivers?(?!'?s?\slicen[cs]e)", "司机"),
            ("passenger", r"passengers?|riders?", "乘客"),
        ),
    ),
    (
        "care",
        (("patient", r"patients?", "患者|病人"), ("doctor", r"doctors?|physicians?", "医生|大夫")),
    ),
    (
        "parcel",
        (
            ("sender", r"senders?", "寄件人|发件人"),
            ("recipient", r"recipients?|receivers?|addressees?", "收件人"),
        ),
    ),
    (
        "class",
        (
            ("teacher", r"teachers?|instructors?|tutors?", "老师|教师"),
            ("student", r"students?|pupils?|learners?", "学生"),
        ),
    ),
    (
        "age",
        (
            ("adult", r"adults?|grown[\s-]?ups?", "成人|成年人|大人"),
            # infants are children here: "an account for my newborn baby" asks what "…
            # for a child" asks (BANKING77 files them together)
            (
                "child",
                r"child(?:ren)?|kids?|minors?|infants?|bab(?:y|ies)|toddlers?|newborns?",
                "儿童|小孩|孩子|未成年人|婴儿|幼儿|宝宝",
            ),
        ),
    ),
    (
        # "heart attack symptoms in men" / "… in women" (session 43, a review: served)
        "sex",
        (
            ("male", r"men|males?|boys?", "男性|男士|男生"),
            ("female", r"women|females?|girls?", "女性|女士|女生"),
        ),
    ),
    (
        "tenure",
        (
            ("new", r"new\s(?:customers?|users?|members?|clients?|subscribers?)", "新用户|新客户"),
            (
                "existing",
                r"(?:existing|current|returning|old)\s(?:customers?|users?|members?|clients?"
                r"|subscribers?)",
                "老用户|老客户|现有用户",
            ),
        ),
    ),
    (
        "hours",
        (
            ("part_time", r"part[\s-]time(?:rs?)?", "兼职"),
            ("full_time", r"full[\s-]time(?:rs?)?", "全职"),
        ),
    ),
    (
        "cabin",
        (
            ("economy", r"(?<!premium\s)economy(?:\sclass)?", "经济舱"),
            ("premium_economy", r"premium\seconomy", "超级经济舱"),
            ("business", r"business\sclass", "商务舱"),
            ("first", r"first\sclass", "头等舱"),
        ),
    ),
    (
        "room",
        (
            ("single", r"single\s(?:rooms?|beds?)", "单人间|单人房"),
            ("double", r"double\s(?:rooms?|beds?)", "双人间|大床房"),
            ("twin", r"twin\s(?:rooms?|beds?)", "标准间|双床房"),
        ),
    ),
    (
        "jurisdiction",
        (
            (
                "state",
                r"state(?=\s(?:laws?|tax(?:es)?|income\stax|courts?|level|minimum\swage))",
                "",
            ),
            ("federal", r"federal", ""),
            ("local", r"local(?=\s(?:laws?|tax(?:es)?|courts?|ordinances?))|municipal", ""),
        ),
    ),
    (
        "reach",
        (
            ("domestic", r"domestic(?:ally)?|within\sthe\scountry", "国内"),
            ("international", r"international(?:ly)?|overseas|abroad", "国际|境外|海外"),
        ),
    ),
    (
        "venue",
        (
            ("online", r"online|on\sthe\sweb", "线上|网上"),
            ("in_store", r"in[\s-]store|in[\s-]person|at\sa\s(?:store|branch)", "线下|门店|实体店"),
        ),
    ),
    # Session 46 (a review, served at verifier 0.986-0.997): the lender / the borrower
    # cancelling a loan, the payer / the payee paying a fee, fees charged to merchants /
    # to customers, a business / a personal account, a parent / a child opening one for
    # the other, a parcel lost / damaged / delayed.
    (
        "loan",
        (
            ("lender", r"lenders?|creditors?", "出借人|放款人|贷款方|债权人"),
            ("borrower", r"borrowers?|debtors?", "借款人|借款方|债务人"),
        ),
    ),
    (
        "payment",
        (
            ("payer", r"payers?|payors?", "付款方|付款人"),
            ("payee", r"payees?|beneficiar(?:y|ies)", "收款方|收款人"),
        ),
    ),
    (
        "commerce",
        (
            ("merchant", r"merchants?|retailers?", "商家|商户"),
            (
                "customer",
                r"(?<!new\s)(?<!existing\s)(?<!current\s)customers?|shoppers?|consumers?",
                "顾客|消费者",
            ),
        ),
    ),
    (
        "holder",
        (
            (
                "business",
                r"(?:business|corporate|company)\s(?:bank\s)?(?:accounts?|cards?|customers?|users?|plans?)",
                "企业账户|企业用户|企业版|公司账户",
            ),
            (
                "personal",
                r"(?:personal|individual)\s(?:bank\s)?(?:accounts?|cards?|customers?|users?|plans?)",
                "个人账户|个人用户|个人版",
            ),
        ),
    ),
    (
        "kin",
        (
            ("parent", r"parents?|guardians?", "家长|父母|监护人"),
            ("child", r"child(?:ren)?|kids?|sons?|daughters?", "孩子|子女|儿子|女儿"),
        ),
    ),
    (
        "mishap",
        (
            ("lost", r"lost|stolen|missing", "丢了|丢失|遗失|被偷|被盗"),
            ("damaged", r"damaged|broken|cracked|smashed", "损坏|破损|坏了|摔坏"),
            ("delayed", r"delayed|running\slate", "延误|延迟"),
        ),
    ),
    # Session 45 (a review, served at verifier 0.983-0.996): open on weekends / on
    # weekdays, the kids menu at dinner / at lunch, vegan / vegetarian friendly, peanuts /
    # tree nuts (a safety misfire), a razor in hand / checked luggage, an iPad / iPhone.
    ("week", (("weekend", r"weekends?", "周末|双休日"), ("weekday", r"weekdays?", "工作日|平日"))),
    (
        "meal",
        (
            ("breakfast", r"breakfasts?", "早餐|早饭"),
            ("lunch", r"lunch(?:es|time)?", "午餐|午饭"),
            ("dinner", r"dinners?|supper", "晚餐|晚饭"),
        ),
    ),
    ("diet", (("vegan", r"vegans?", "纯素"), ("vegetarian", r"vegetarians?", "蛋奶素"))),
    (
        "allergen",
        (
            ("peanut", r"peanuts?", "花生"),
            ("tree_nut", r"tree\snuts?", ""),
            # "nuts" alone (and 坚果): a question about every nut, not about peanuts
            ("nut", r"(?<!pea)(?<!tree\s)(?<!dough)(?<!do)nuts?", "坚果"),
            ("gluten", r"gluten", "麸质"),
            ("dairy", r"dairy|lactose", "乳制品|乳糖"),
            ("soy", r"soy|soya", "大豆"),
            ("shellfish", r"shellfish", "贝类"),
            ("sesame", r"sesame", "芝麻"),
        ),
    ),
    (
        "luggage",
        (
            (
                "cabin",
                r"carry[\s-]?ons?|hand\s(?:luggage|baggage)|cabin\s(?:bags?|baggage)",
                "随身|手提",
            ),
            ("checked", r"checked(?:[\s-]in)?\s(?:bags?|baggage|luggage|suitcases?)", "托运"),
        ),
    ),
    # a size or a colour asked for: only after "size" / "in" ("Black Friday", "a
    # small business" are neither)
    (
        "size",
        (
            ("xs", r"size\s(?:xs|extra[\s-]small)", ""),
            ("s", r"size\s(?:s|small)", ""),
            ("m", r"size\s(?:m|medium)", ""),
            ("l", r"size\s(?:l|large)", ""),
            ("xl", r"size\s(?:xl|extra[\s-]large)", ""),
            ("xxl", r"size\s(?:xxl|2xl)", ""),
        ),
    ),
    (
        "colour",
        tuple(
            (c, rf"(?<=\bin\s){pattern}", "")
            for c, pattern in (
                ("black", "black"),
                ("white", "white"),
                ("grey", "gr[ea]y"),
                ("red", "red"),
                ("blue", "blue"),
                ("green", "green"),
                ("pink", "pink"),
                ("brown", "brown"),
            )
        ),
    ),
    (
        "discount_group",
        tuple(
            (
                g,
                rf"{g}s?(?=\s(?:discounts?|rates?|prices?|tickets?|pass(?:es)?|fares?))"
                rf"|(?<=(?:ount|rate|ates|rice|kets|fare|ares|sses|pass)\sfor\s){g}s?",
                "",
            )
            for g in ("student", "senior", "military", "veteran", "teacher", "nurse")
        ),
    ),
    (
        "apple_device",
        (
            ("iphone", r"iphones?", ""),
            ("ipad", r"ipads?", ""),
            (
                "mac",
                r"macbooks?(?:\s(?:air|pro))?|imacs?|(?<!big\s)macs?(?![\s-]?(?:address|os))",
                "",
            ),
            ("watch", r"apple\swatch(?:es)?", ""),
        ),
    ),
    (
        "surface",
        (
            ("app", r"(?:mobile\s)?app(?:s)?", "手机端|客户端"),
            ("website", r"web\s?sites?|web\sbrowsers?", "网页版|官网"),
        ),
    ),
    # Session 48 (a misfire hunt through the defaults, served at verifier 0.983-0.997):
    # a price or a limit per person / per group / per order / per item, individual or
    # group tickets and a company's invoice (个人 / 团体 / 公司), a primary or a secondary
    # card, a savings or a checking account, a joint or an individual one, sending or
    # collecting a parcel (寄 / 收 / 取), the first time or every time (首次 / 每次).
    (
        "scope",
        (
            (
                "person",
                # an account counts as a person here: "cards per account" is "per person"
                r"(?:per|each)\s(?:person|head|individual|customer|user|guest|passenger|adult"
                r"|account)",
                "每人|每位|每个人|每个用户|每位顾客|每个账户|每个账号",
            ),
            (
                "group",
                r"per\s(?:group|party|team|family|household)",
                "每组|每团|每个团|每户|每个家庭",
            ),
            (
                "order",
                r"(?:per|each)\s(?:order|booking|reservation|transaction|purchase)",
                "每单|每个订单|每笔订单|每笔交易",
            ),
            ("item", r"(?:per|each)\s(?:item|product|piece)", "每件|每个商品|每件商品"),
            ("device", r"(?:per|each)\s(?:device|profile|screen)", "每台设备|每个设备"),
        ),
    ),
    (
        "party",
        (
            (
                "individual",
                r"individual\s(?:tickets?|bookings?|rates?|fares?|travell?ers?|visitors?"
                r"|memberships?|plans?)|solo\stravell?ers?|(?:for|as)\s(?:an\s)?individuals?",
                # 个人 / 公司 / 家庭 only before what a party buys or asks for (not 个人信息,
                # 个人总结, "公司让我…")
                "个人(?=怎么|如何|可以|能|要|需要|开|发票|抬头|名义|会员|门票|票|年费|套餐|游)|散客",
            ),
            (
                "group",
                r"group\s(?:tickets?|bookings?|rates?|fares?|travel|tours?|visits?|discounts?)"
                r"|(?:for|as)\s(?:a\s)?groups?(?!\s(?:chat|message|call))",
                "团体|旅行团",
            ),
            (
                "company",
                r"company\s(?:invoices?|purchases?)",
                "(?:公司|单位)(?=怎么|如何|可以|能|要|需要|开|发票|抬头|名义|会员|门票|票|年费|套餐)",
            ),
            (
                "family",
                r"family\s(?:memberships?|plans?|tickets?|pass(?:es)?)",
                "家庭(?=会员|套餐|版|票|门票|年卡|计划|共享|保单)|全家票",
            ),
        ),
    ),
    (
        "card_role",
        (
            ("primary", r"primary\s(?:card|account)(?:\s?holders?)?|main\scard", "主卡"),
            (
                "secondary",
                r"(?:secondary|supplementary|additional)\s(?:card|account)(?:\s?holders?)?",
                "副卡|附属卡",
            ),
        ),
    ),
    (
        "account_kind",
        (
            ("savings", r"savings\saccounts?", ""),
            ("checking", r"(?:checking|chequing)\saccounts?", ""),
        ),
    ),
    (
        "ownership",
        (
            ("joint", r"joint\saccounts?", "联名账户|联名卡"),
            ("sole", r"(?:sole|single|individual)\saccounts?", ""),
        ),
    ),
    (
        "parcel_act",
        (
            ("send", "", "寄快递|寄件(?!人)|寄包裹|发快递|寄东西"),
            # not 取件 alone: 上门取件 is a courier collecting what one sends
            ("collect", "", "收快递|收件(?!人)|取快递|收包裹|领快递"),
        ),
    ),
    (
        "occasion",
        (
            ("first", r"(?:the\s)?first\stime", "首次|第一次|头一次"),
            ("every", r"every\stime|each\stime", "每次|每一次"),
        ),
    ),
)


def _member(en: str, zh: str) -> str:
    """One member's regex, English and Chinese together (either may be empty)."""
    return "|".join(part for part in (_en(en) if en else "", zh) if part)


def member_patterns() -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    """Each set's members as ``(member, regex)``, English and Chinese together."""
    return tuple(
        (name, tuple((m, _member(en, zh)) for m, en, zh in members))
        for name, members in CONTRAST_SETS
    )


def contrast_pairs() -> tuple[tuple[str, str, str], ...]:
    """Every two members of a set as ``(name, plus regex, minus regex)``, the shape of
    ``validators.antonyms.ANTONYMS`` entries (``plus`` / ``minus`` are whole regexes
    here, English and Chinese together)."""
    out: list[tuple[str, str, str]] = []
    for set_name, members in CONTRAST_SETS:
        for (a, en_a, zh_a), (b, en_b, zh_b) in combinations(members, 2):
            out.append((f"contrast_{set_name}_{a}_{b}", _member(en_a, zh_a), _member(en_b, zh_b)))
    return tuple(out)


#: Sets whose two members in one text name no roles: "from my savings account to
#: checking" is "into checking from savings" (session 48's sets but the parties').
_UNORDERED = frozenset(
    {"scope", "card_role", "account_kind", "ownership", "parcel_act", "occasion", "party"}
)

_MEMBERS = [
    (name, [(m, re.compile(p, re.IGNORECASE)) for m, p in members])
    for name, members in member_patterns()
]
_PASSIVE = re.compile(_en(r"by\s(?:the|a|an|his|her|their|my|your)") + "|被|由", re.IGNORECASE)
# "buyers and sellers", "买家和卖家": two members joined, in no order that means anything
_JOINED = re.compile(
    r"\s*(?:,\s*)?(?:and|or|&|/|vs\.?|versus|as\swell\sas|和|或|与|跟|及|以及|、)"
    r"\s*(?:(?:the|a|an|their|its)\s)?",
    re.IGNORECASE,
)


def contrast_values(text: str) -> set[str]:
    """The polarity values of the contrast sets, from one search per member: each pair's
    ``contrast_<set>_<a>_<b>:+`` / ``:-`` (the pairs of :func:`contrast_pairs`, which
    ``validators.polarity`` compares), and ``order_<set>:<a>><b>`` for a set two of
    whose members the text names, in the order it first names them (a role swap: guest
    … host against host … guest); no order for a passive or two members joined by
    "and" / "or" / 和."""
    out: set[str] = set()
    passive = _PASSIVE.search(text) is not None
    for name, members in _MEMBERS:
        first = sorted(
            (m.start(), m.end(), member)
            for member, pattern in members
            if (m := pattern.search(text))
        )
        named = {member for _, _, member in first}
        for (a, _), (b, _) in combinations(members, 2):
            if a in named:
                out.add(f"contrast_{name}_{a}_{b}:+")
            if b in named:
                out.add(f"contrast_{name}_{a}_{b}:-")
        two = len(first) >= 2 and not passive and name not in _UNORDERED
        if two and not _JOINED.fullmatch(text, first[0][1], first[1][0]):
            out.add(f"order_{name}:{first[0][2]}>{first[1][2]}")
    return out


def orders_agree(a: Set[str], b: Set[str]) -> bool:
    """False when both texts order one set's two members, differently."""
    orders_a = dict(v.split(":", 1) for v in a if v.startswith("order_"))
    orders_b = dict(v.split(":", 1) for v in b if v.startswith("order_"))
    return all(orders_b.get(s, order) == order for s, order in orders_a.items())


def known_order_value(value: str) -> bool:
    name, _, pole = value.partition(":")
    members = {m for m, _ in dict(member_patterns()).get(name.removeprefix("order_"), ())}
    first, _, second = pole.partition(">")
    return first in members and second in members and first != second
