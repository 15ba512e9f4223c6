"""Contrast sets of what a price, a limit or an act applies to (``validators.contrasts``
reads them; session 48's misfire hunt found each served at verifier 0.983-0.997): per
person / per group / per order, an individual's or a company's invoice, a primary or a
secondary card, a savings or a checking account, sending or collecting a parcel, the
first time or every time. Entries as in ``validators.contrast_kinds``. Their two members
in one text name no roles, so no order is read (``UNORDERED``)."""

from __future__ import annotations

from validators.contrast_roles import CATEGORY_NAMES
from validators.contrast_variants import VARIANT_NAMES

#: Sets of scopes (the module docstring).
SCOPE_SETS: tuple[tuple[str, tuple[tuple[str, str, str], ...]], ...] = (
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
            # session 52: 首次 / 再次申领护照 (served at 0.995 in a misfire hunt)
            ("again", r"(?:a|the)\ssecond\stime", "再次|第二次|重新申领|重新申请|补办"),
        ),
    ),
)

#: Every set here: "from my savings account to checking" is "into checking from savings";
#: and session 49's addresses and editions ("upgrade from the free plan to the pro plan"
#: is "upgrade to the pro plan from the free plan", "may the billing address differ from
#: the shipping address" asks what its mirror asks).
UNORDERED = frozenset(
    [
        *(name for name, _ in SCOPE_SETS),
        "address_medium",
        "address_use",
        "edition",
        # session 50: "files from my phone on my computer" is "… to my PC from my phone"
        "device_form",
        "mobile_os",
        # session 51: sibling categories ("generic and brand-name drugs")
        *CATEGORY_NAMES,
        *VARIANT_NAMES,
    ]
)
