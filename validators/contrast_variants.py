"""Contrast sets of a product's variant and an item's condition (``validators.contrasts``
reads them). Session 51's misfire hunt through the defaults found them served at
verifier 0.990-0.997: a wireless / wired mouse, a cordless / corded vacuum, hardcover /
paperback, an analog / digital watch, a manual / automatic car, 无线 / 有线耳机, 变频 /
定频空调; an unopened / a used / a damaged item to return, 全新 / 二手. Entries as in
``validators.contrast_kinds``; every set is ``UNORDERED`` (``VARIANT_NAMES``): "wired
or wireless" and "wireless or wired" ask one thing.

Words that are mostly something else are anchored: "manual" and "automatic" only before
a gearbox or a car (a manual top-up asks what an automatic one does; the user manual is
a booklet), "used" only before what is sold or worn ("I used my card" is none),
"digital" only before a watch, clock, display or camera (a digital card or wallet is
none).
"""

from __future__ import annotations

_GOODS = (
    r"(?:items?|products?|goods|cars?|vehicles?|books?|textbooks?|phones?|laptops?|clothes"
    r"|clothing|shoes|bikes?|furniture|electronics|devices?|games?|equipment|tyres?|tires?)"
)

# what is manual or automatic as a variant: a gearbox, not a top-up ("Is there an
# automatic top-up?" / "Do I have to top up manually?" is one BANKING77 intent)
_GEARBOX = r"(?:transmissions?|cars?|gearbox(?:es)?|vehicles?|models?|versions?)"

#: Variants and conditions (the module docstring); no order is read.
VARIANT_SETS: tuple[tuple[str, tuple[tuple[str, str, str], ...]], ...] = (
    (
        "connection",
        (
            ("wired", r"wired|corded", "有线"),
            ("wireless", r"wireless|cordless|bluetooth", "无线|蓝牙"),
        ),
    ),
    (
        "operation",
        (
            (
                "manual",
                rf"manual(?=\s{_GEARBOX})",
                "手动挡",
            ),
            ("automatic", rf"automatic(?=\s{_GEARBOX})", "自动挡"),
        ),
    ),
    (
        "display",
        (
            ("analog", r"analog(?:ue)?", "指针式"),
            (
                "digital",
                r"digital(?=\s(?:watch|watches|clocks?|displays?|cameras?|thermometers?))",
                "数字式|数显",
            ),
        ),
    ),
    (
        "binding",
        (("hardcover", r"hard(?:cover|back)s?", "精装"), ("paperback", r"paperbacks?", "平装")),
    ),
    ("loading", (("front", r"front[\s-]load\w*", "滚筒"), ("top", r"top[\s-]load\w*", "波轮"))),
    (
        "billing",
        (("prepaid", r"pre[\s-]?paid", "预付费"), ("postpaid", r"post[\s-]?paid", "后付费")),
    ),
    ("compressor", (("inverter", r"inverter", "变频"), ("fixed", r"fixed[\s-]speed", "定频"))),
    (
        "condition",
        (
            (
                "new",
                r"brand[\s-]new|unused|unopened|unworn|sealed|in\s(?:the|its)\soriginal\spackaging",
                "全新|未拆封|没拆封|未使用|没用过|没穿过",
            ),
            (
                "used",
                rf"used\s{_GOODS}|second[\s-]hand|pre[\s-]owned|refurbished|open[\s-]box",
                "二手|翻新|用过|穿过|拆封过|已拆封",
            ),
            ("damaged", r"damaged|defective|faulty|cracked", "损坏|破损|有瑕疵|碎屏"),
        ),
    ),
)

#: The variant sets' names: ``validators.contrast_scopes.UNORDERED`` holds them.
VARIANT_NAMES = tuple(name for name, _ in VARIANT_SETS)
