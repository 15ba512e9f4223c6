"""Asked as a duty or as a choice, of all or of some: the polarity pairs of modality.

"Do I need to book a table in advance?" and "Can I book a table in advance?", "Is
travel insurance mandatory?" and "… optional?", "Do all plans include priority
support?" and "Do any plans …?", 需要提前订座吗 / 可以提前订座吗, 所有套餐 / 部分套餐:
one word turns a yes into a no, and the embedder and the pair verifier both read
them as one question (a review, session 45, found each served at verifier scores of
0.983-0.997). Each pair refuses only when both texts name it with opposite poles
(``default`` "any", as the antonyms): a text naming neither is no contrast.

English is read only where the modal heads the question ("Do I need …", "Can I …",
"Is it required …", "Are children allowed …"), so "How can I reset it?" still asks
what "How do I reset it?" asks; Chinese only in a yes-no question (…吗, 是否…), so
需要多久 (how long it takes) is no duty.
"""

from __future__ import annotations

from validators.opposites import ActionPair

# what may come before the question's head: a greeting, "so", "and", "please"
_HEAD = r"^[\W_]*(?:(?:so|and|but|also|please|hi|hello|hey|ok|okay)[\W_]+)*"
_WHO = r"(?:[a-z'’]+\s){1,3}?"  # the subject: "I", "my daughter", "the front desk"
_DUTY_EN = (
    rf"{_HEAD}(?:do|does|did|will|would)\s{_WHO}(?:really\s|still\s|also\s)?"
    rf"(?:need|have\sto(?!-)|require)(?![a-z])"  # not "have to-go boxes"
    rf"|{_HEAD}(?:must|should|shall)\s{_WHO}"
    rf"|{_HEAD}(?:am|is|are|was|were|will)\s{_WHO}(?:be\s)?(?:required|mandatory|compulsory"
    rf"|necessary|obligatory|needed)(?![a-z])"
)
# "Can you …" is a request to the one asked ("can you check my tire pressure"), no
# choice; nor is a polite head ("May I ask if I need to …", "Could I check whether …")
_SUBJECT = r"(?:i|we|one|they|he|she|[a-z'’-]+s|(?:my|our|the|a|an|this)\s[a-z'’-]+)\s"
_CHOICE_EN = (
    rf"{_HEAD}(?:can|could|may)\s{_SUBJECT}"
    r"(?!(?:ask|know|check|confirm|inquire|enquire|find\sout|see)(?![a-z]))"
    rf"|{_HEAD}(?:am|is|are|was|were|will)\s{_WHO}(?:be\s)?(?:allowed|permitted|possible"
    rf"|optional|ok|okay|accepted)(?![a-z])"
)
# "How often can I change my PIN?" / "How often should I …?", "How many times can I
# reschedule?" / "… should I …?", "How long can I keep the car?": a quantity asked of
# a choice or of a duty (session 46's review:
# served at 0.995-0.998); not an expectation ("How long should I expect to wait?", "how
# long do we have to wait", "how long should my card take": how long it takes)
_HOW_MUCH = rf"{_HEAD}how\s(?:often|frequently|many\stimes|long|soon|early|late|much|far)\s"
_NOT_EXPECTED = (
    r"(?!(?:[a-z'’-]+\s)?(?:expect|wait|anticipate|plan|take|takes|last|arrive)(?![a-z]))"
)
_DUTY_EN += (
    rf"|{_HOW_MUCH}(?:should|must)\s{_SUBJECT}{_NOT_EXPECTED}"
    # "How long do I have to return it?" asks the window, not a duty (the diff review)
    rf"|{_HOW_MUCH}(?:do|does)\s{_SUBJECT}need\sto\s{_NOT_EXPECTED}"
)
_CHOICE_EN += rf"|{_HOW_MUCH}(?:can|could|may)\s{_SUBJECT}{_NOT_EXPECTED}"
# a yes-no question: the modal and its 吗 within one clause, or 是否 / 要不要 before it
_CLAUSE = r"[^，。？！?!,;；]{0,24}吗"
# a frequency or a count asked with 应该 / 可以 (应该多久改一次 / 可以多久改一次); not 需要
# 多久, which asks how long something takes
_HOW_OFTEN_ZH = r"(?=[^，。？！?!,;；]{0,6}(?:多久|几次|多少次|多长时间|多频繁))"
_DUTY_ZH = (
    rf"(?:需要|必须|一定要|应该|应当|必需|强制)(?={_CLAUSE})|是否(?:需要|必须|应该)"
    rf"|要不要|需不需要|(?:应该|应当|必须){_HOW_OFTEN_ZH}|(?<=多久)(?:应该|应当|必须)"
)
# 能 alone, not inside 功能 / 可能 / 智能 / 性能 / 才能
_CHOICE_ZH = (
    rf"(?:可以|允许|(?<![功可智性才技])能够?)(?={_CLAUSE})|是否(?:可以|能|允许)"
    rf"|可不可以|能不能|能否|可否|(?:可以|最多能)(?=[^，。？！?!,;；]{{0,6}}(?:多久|几次|多少次|多长时间))"
    r"|(?<=多久)(?:可以|能)"
)

_ALL_EN = rf"{_HEAD}(?:do|does|are|is|will|can|were|was|have|has)\s(?:all|every|each)(?![a-z])"
_SOME_EN = rf"{_HEAD}(?:do|does|are|is|will|can|were|was|have|has)\s(?:any|some)(?![a-z])"
_ALL_ZH = r"所有|全部|每个|每一个|每款|每家|每位|每张|每件|每种"
_SOME_ZH = r"(?<![这那一大])部分|(?<!所)有的|有些|某些|个别"

MODALITY_PAIRS = (
    ActionPair("modal_duty", f"{_DUTY_EN}|{_DUTY_ZH}", f"{_CHOICE_EN}|{_CHOICE_ZH}", "any"),
    ActionPair("quantifier_all", f"{_ALL_EN}|{_ALL_ZH}", f"{_SOME_EN}|{_SOME_ZH}", "any"),
)
