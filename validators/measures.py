"""Quantities and times in a question: the polarity pairs of more / less, first / last.

"What is the maximum …?" / "… the minimum …?", an age limit (a minimum unless it says
maximum), an allowance left / used, before / after, from now / ago, more / less than,
at least / at most: the pairs of ``validators.polarity`` that read an amount, an age or
a time rather than an action (split out of polarity.py in session 46, unchanged). Numbers
and amounts are masked as "_" characters before they are read.
"""

from __future__ import annotations

from validators.opposites import ActionPair
from validators.opposites import en_words as _en

# What "over"/"under" must be followed by to be a comparison of amounts or ages
# ("over 18", "under $500", "over the age of 65"), not "over the phone"/"under my name".
# (the extractor masks numbers and amounts as "_" before polarity reads the text).
_AMOUNT = r"(?:_|[$€£¥₹]?\d|the\sage\b|age\b)"
_A_TIME = (
    r"(?:(?:the\s)?(?:first|next|last)\s)?(?:_+|\d+|a|an|one)\s(?:(?:business|calendar|working|full)\s)?"
    r"(?:days?|weeks?|months?|years?|hours?)\b"
)
_NOT_AGE = r"(?!\s(?:age|ages)\b)"  # a minimum or maximum age is the age_limit pair's
# "after" not right after a time ("30 days after purchase" starts the time there)
_NOT_A_TIME_BEFORE = "".join(
    rf"(?<!{unit}\s)"
    for unit in (
        "day",
        "days",
        "week",
        "weeks",
        "month",
        "months",
        "year",
        "years",
        "hour",
        "hours",
    )
)
# a counted time unit in Chinese (七天, 3个月, 两周), not 几天 / 多少天 (a question)
_ZH_COUNTED = r"(?<!几[天日周月年])(?<!几个[月周])(?<!几小时)(?<!多少天)(?<=[天日周月年时钟])"
_AFTER_A_TIME = _A_TIME + r"\s(?:after|past|since|later)\b"

# 前 / 后 straight after what they are before or after (no 之 / 以): 饭前 / 饭后, 税前 /
# 税后, 术前 / 术后 (session 44: a review found 饭前 / 饭后吃布洛芬 served each other's
# answers); only after these, since 前 / 后 end many words (目前, 提前, 前天, 售后, 然后).
# (前端 / 后台 / 前台 are a front end, a back end and a front desk: no order)
_ZH_BEFORE_AFTER = (
    "(?:(?<=[饭餐税婚睡])|(?<=(?<![技艺学美算战])术)|(?<=(?<![资房财生地])产)"
    "|(?<=考试|起飞|登机|发货|入住|下单|付款|退房|出院|手术|分娩"
    # session 50 (a misfire hunt): the events of a job, a school year and a contract
    "|离职|入职|退休|毕业|转正|开学|放假|过期|签约|到账|签收|注销|结婚|怀孕"
    # session 52 (a misfire hunt: 续保前 / 续保后可以退保吗 served at 0.994): a policy's,
    # a plan's and an account's events
    "|续保|续约|续费|到期|开通|激活|注册|报名|缴费|安装)){}(?![端台])"
)


MEASURE_PAIRS: tuple[ActionPair, ...] = (
    ActionPair(
        "extreme",
        _en(r"(?:max|maximum|highest|largest|biggest|upper\slimit)" + _NOT_AGE)
        + "|最高(?!年龄)|最大(?!年龄)|最多|上限",
        _en(r"(?:min|minimum|lowest|smallest|lower\slimit)" + _NOT_AGE)
        + "|最低(?!年龄)|最小(?!年龄)|最少|下限",
        "+",
    ),
    # An age limit is a minimum unless it says otherwise: "What is the minimum age to
    # open an account?" asks what "How old do I need to be to …?" and "Is there an age
    # requirement?" ask (session 46: refused as a one-sided minimum); a maximum age is
    # another question, asked alone or against the minimum.
    ActionPair(
        "age_limit",
        _en(r"(?:max|maximum|highest|oldest|upper)\sage|age\s(?:cap|ceiling|maximum)")
        + "|最高年龄|最大年龄|年龄上限",
        _en(r"(?:min|minimum|lowest|youngest|lower)\sage|age\s(?:minimum|floor)")
        + "|最低年龄|最小年龄|年龄下限",
        "-",
    ),
    # An allowance's rest against its consumption: "how many vacation days do I have
    # left?" and "how many have I used?" have different answers (PTO, data, credit,
    # budget). Only in a question that asks an amount, and only a consumption that has
    # happened ("have I used", "used up"; a bare "used" as in "which currency is used
    # in Japan?" is none). Refused only when the two texts name opposite poles: a
    # synonym the lists lack ("utilised", "taken off") must not refuse a paraphrase.
    ActionPair(
        "usage",
        _en(
            r"left|remaining|remain(?:s|der)?|available|balance|saved(?:\sup)?|accrued"
            r"|accumulated|to\sspare|do\s(?:i|we)\s(?:still\s)?have|(?:i|we)\sstill\shave"
        )
        # 可用 / 还能休: "available" / "can still take" (年假还能休几天)
        + "|剩余|剩下|还剩|余额|还有多少|可用(?!于)|还能休|还可以休|还能用|还可以用",
        _en(
            r"(?:have|has|had)\s(?:\w+\s){0,2}?"
            r"(?:used|spent|taken|consumed|utili[sz]ed|gone\sthrough)"
            r"|(?:used|use|using|spent|spend|spending)\sup"
        )
        + r"|(?:'ve|'d)\s(?:\w+\s){0,2}?(?:used|spent|taken|consumed|utili[sz]ed)"
        + "|已用|已使用|已经使用|用掉|用了多少|花了多少|消耗了"
        # leave taken: 已休 / 休过 / 休了 / 请了 (多少天假); not 累计, "accrued" (累计积分),
        # nor the same characters in 申请了 / 邀请过 / 退休了 ("applied", "retired")
        + "|已休|已经休|(?<!退)休[过了]|已请|(?<![申邀聘])请[了过]",
        "any",
        only_if=_en(r"how\s(?:much|many)|amount|number|total|count")
        + "|多少|几|数量|总数|天数|金额",
    ),
    ActionPair(
        "order",
        # "within 30 days" is before the 30 days are over (session 46: it passed against
        # "more than 30 days after purchase", read as "after 30 days")
        _en(
            r"before|prior\sto|earlier\sthan"
            r"|(?:within|up\sto|no\slater\sthan)(?=\s" + _A_TIME + ")"
        )
        + "|之前|以前|"
        + _ZH_BEFORE_AFTER.format("前")
        # 七天内 / 七天后: within a time against after it (a review: the verifier scored
        # 七天内可以退货吗 / 七天后可以退货吗 0.9811, at the cut); not 几天内 / 几天后, which
        # ask one thing (退款几天内到账 / 几天后到账)
        + "|"
        + _ZH_COUNTED
        + "(?:之|以)?内",
        # "more than 30 days after purchase" is after; "30 days after purchase" and
        # "within 30 days after purchase" name when the time starts, no order (the diff
        # review of session 46)
        _en(
            r"(?:more|greater|longer)\sthan\s"
            + _A_TIME
            + r"\s(?:after|past|since|from)|"
            + _NOT_A_TIME_BEFORE
            + r"after|(?<!no\s)later\sthan"
        )
        + "|之后|以后|"
        + _ZH_BEFORE_AFTER.format("后")
        + "|"
        + _ZH_COUNTED
        + "后",
        "any",
    ),
    ActionPair(
        "relative",
        _en(r"from\snow|later(?!\sthan)|hence") + "|(?<=[天周月年时钟])后",
        _en(r"ago") + "|(?<=[天周月年时钟])前",
        "any",
    ),
    ActionPair(
        "comparison",
        # "more than 30 days after purchase" is "after 30 days": an order, not a bound
        _en(
            r"(?<!no\s)(?:more|greater)\sthan(?!\s" + _AFTER_A_TIME + ")"
            r"|above|exceed(?:s|ed|ing)?|over(?=\s?" + _AMOUNT + ")"
        )
        + "|超过|多于|高于|大于|以上",
        # "no more than"/"no less than" are the bounds below, not comparisons
        _en(r"(?<!no\s)(?:less|fewer)\sthan|below|under(?=\s?" + _AMOUNT + ")")
        + "|少于|低于|小于|不足|以下",
        None,
    ),
    # An inclusive bound: "at least 3" vs "at most 3". Refused only when the two texts
    # name opposite poles ("do I need at least 3 references?" ≈ "do I need 3 references?").
    ActionPair(
        "bound",
        _en(r"at\sleast|no\sless\sthan|no\sfewer\sthan|or\s(?:more|above|older|over)")
        + "|至少|起码",
        _en(r"at\smost|no\smore\sthan|up\sto|or\s(?:less|fewer|below|younger|under)")
        + r"|至多|最多只|不到(?=[_\d一二三四五六七八九十两几百千万])",
        "any",
    ),
)
