"""Contrast sets of inside or outside a boundary, and of who runs a group (``validators.
contrasts`` reads them). Session 50's misfire hunt through the defaults found them
served at verifier 0.986-0.997: an in-network / out-of-network doctor, in-state /
out-of-state tuition, inpatient / outpatient surgery, on-campus / off-campus housing,
an indoor / outdoor pool, 省内 / 省外医保, 校内 / 校外住宿, 网内 / 网外通话, 市内 / 市外打车;
a group's owner / admin / member ("Can the owner remove a member?" / "Can a member
remove the owner?", 群主 / 群成员); and the device or system a step is done on (the
desktop / the mobile app, 电脑端 / 手机端, iOS / Android, at 0.983-0.994). Entries as in
``validators.contrast_kinds``.

Session 52's hunt added inside / outside a building or premises ("smoke inside / outside
the hotel", pets on the terrace), within / outside a town or a network, peak / off-peak
(高峰 / 低谷, 峰电 / 谷电), 园区内 / 外 and 本地 / 外地 students or residents (served at
0.986-0.997). "Outside the EU" is a place (``validators.places``) and "outside business
hours" no setting; 本地 only of who lives there ("户籍不在本地" is 外地).

Chinese members are the boundary's character with 内 / 外 before what is inside it
(医保, 住宿, 通话 …), never 外 alone (外卖, 外币, 外国 are other words) nor 内 alone (内容,
内存). 国内 / 境内 against 国际 / 境外 is the ``reach`` set of ``contrast_kinds``.
"""

from __future__ import annotations

# session 52 (a misfire hunt: "Is delivery free within the city?" / "… outside the city?",
# smoking inside / outside the hotel, calls within / outside the network, a shuttle in
# peak / off-peak hours, served at verifier 0.993-0.996): inside or outside only of a
# building or a town, never "outside the EU" (a place: validators.places) nor "outside
# (our) office hours", "within the area code" (what follows names no place: the diff
# review)
_NOT_A_PLACE = (
    r"(?!(?:['’]s)?\s(?:hours|hrs|times?|days?|codes?|numbers?|phones?|emails?|address(?:es)?|opening"
    r"|closing|managers?|staff))"
)
_LOCALITY = (
    r"(?:city|town|village|area|zone|region|county|borough|district|city\slimits)" + _NOT_A_PLACE
)
_PREMISES = (
    r"(?:the\s|our\s|your\s|a\s)(?:hotel|restaurant|building|terminal|store|shop|mall|venue"
    r"|stadium|arena|airport|station|museum|cinema|theat(?:er|re)|park|office|branch|cafe"
    r"|bar|club|gym|hospital|school|room|lobby|premises|bank|campus|library|church)s?"
    + _NOT_A_PLACE
)

#: Sets of settings (the module docstring).
SETTING_SETS: tuple[tuple[str, tuple[tuple[str, str, str], ...]], ...] = (
    (
        "network",
        (
            ("in", r"in[\s-]network|within\s(?:the\s|our\s|your\s)?network", "网内"),
            (
                "out",
                r"out[\s-]of[\s-]network|non[\s-]network|outside\s(?:the\s|our\s|your\s)?network",
                "网外",
            ),
        ),
    ),
    (
        "region",
        (
            (
                "in",
                r"in[\s-](?:state|province)|(?:state|province)\sresidents?"
                rf"|within\s(?:the\s)?{_LOCALITY}",
                # 本地 only of who lives there: "户籍不在本地" is 外地 (the topic pool)
                "省内|市内|(?<!非)(?<!不是)本地(?=学生|居民|户口|户籍|人(?!员))",
            ),
            (
                "out",
                r"out[\s-]of[\s-](?:state|province)|non[\s-]residents?"
                rf"|outside\s(?:the\s)?{_LOCALITY}",
                "省外|市外|外省|外市|外地|异地",
            ),
        ),
    ),
    (
        "care_setting",
        (
            ("inpatient", r"inpatients?", "住院"),
            ("outpatient", r"outpatients?", "门诊"),
        ),
    ),
    (
        "campus",
        (
            ("on", r"on[\s-]campus", "校内|园区内"),
            ("off", r"off[\s-]campus", "校外|园区外"),
        ),
    ),
    (
        "indoor",
        (
            ("indoor", rf"indoors?|inside\s{_PREMISES}", "室内"),
            (
                "outdoor",
                rf"outdoors?|outside\s{_PREMISES}|on\s(?:the|our|your)\s(?:[a-z]+\s)?"
                r"(?:terrace|patio|balcony|deck)",
                "室外|户外",
            ),
        ),
    ),
    (
        "peak",
        (
            (
                "peak",
                # "outside (of) peak hours" and 避开高峰 / 高峰期以外 are off-peak (the
                # diff review)
                r"(?<!off[\s-])(?<!off)(?<!non[\s-])(?<!outside\s)(?<!outside\sof\s)"
                r"(?<!avoid\s)(?<!avoiding\s)peak(?=[\s-](?:hours?|times?|seasons?|rates?"
                r"|fares?|tickets?|periods?|travel|days?|pricing|prices?|tariffs?))",
                "(?<![非避])(?<!避开)高峰(?!期?(?:以外|之外))|(?<![高平])峰时|峰电|峰段|旺季",
            ),
            (
                "off_peak",
                r"off[\s-]?peak|non[\s-]peak|(?:outside|avoid(?:ing)?)\s(?:of\s)?(?:the\s)?peak",
                "非高峰|避开高峰|错峰|高峰期?(?:以外|之外)|低谷|谷时|谷电|谷段|平峰|淡季",
            ),
        ),
    ),
    ("mailbox", (("inbox", r"inbox(?:es)?", "收件箱"), ("outbox", r"outbox(?:es)?", "发件箱"))),
    # the device or system a step is done on (session 50: desktop / mobile app, 电脑端 /
    # 手机端, 苹果 / 安卓 served at 0.983-0.994): a phone only as what something is done on
    # or from ("my phone number" is no device)
    (
        "device_form",
        (
            (
                "desktop",
                r"desktop(?:\s(?:app|version|site|client))?|(?:on|onto|from|to|into|with|using|via)\s"
                r"(?:my\s|a\s|the\s|your\s)?(?:computers?|laptops?|pcs?|desktops?)",
                "电脑端|电脑版|PC端|桌面版|电脑上",
            ),
            (
                "mobile",
                r"mobile\s(?:app|version|site|browser)|(?:on|onto|from|to|into|with|using|via)\s"
                r"(?:my\s|a\s|the\s|your\s)?(?:phones?|smartphones?|mobiles?|tablets?)"
                # "with my phone number", "my phone bill": no device (the diff review)
                r"(?!['’]?s?\s(?:numbers?|bills?|plans?|calls?|lines?|carriers?|company|service"
                r"|support|contacts?|files?|photos?|data))",
                "手机端|手机版|移动端|手机上",
            ),
        ),
    ),
    (
        "mobile_os",
        (
            ("ios", r"ios|ipados", "苹果手机|苹果系统|iOS"),
            ("android", r"android", "安卓"),
        ),
    ),
    (
        "group_role",
        (
            ("owner", r"(?:group|team|account|channel|server|workspace)\sowners?", "群主"),
            ("admin", r"admins?|administrators?", "管理员"),
            ("moderator", r"moderators?|mods", "版主"),
            (
                "member",
                r"(?:group|team|channel|server|workspace)\smembers?|(?<!family\s)members?"
                r"(?=\sof\sthe\s(?:group|team|channel))",
                "群成员|群友",
            ),
        ),
    ),
)
