"""Opposite evaluations (``validators.antonyms``, read by ``polarity``): refused only
when both texts name opposite poles."""

from __future__ import annotations

import pytest

from tests.validators.conftest import mismatch
from validators import extract_entities
from validators.antonyms import ANTONYMS
from validators.polarity import polarity_values
from validators.text import prepare

DIFFERENT = [
    ("Classify the sentiment: I love this phone.", "Classify the sentiment: I hate this phone."),
    (
        "Is the sentiment positive: the movie was excellent",
        "Is the sentiment positive: the movie was terrible",
    ),
    ("What are the best budget phones?", "What are the worst budget phones?"),
    ("Is it a good idea to pay off my card early?", "Is it a bad idea to pay off my card early?"),
    (
        "What's the cheapest way to send money abroad?",
        "What's the most expensive way to send money abroad?",
    ),
    ("Which is faster, a transfer or a wire?", "Which is slower, a transfer or a wire?"),
    ("Do customers like the new app?", "Do customers dislike the new app?"),
    # directions and levels a review found served (session 43, verifier 0.982-0.996)
    (
        "What are the symptoms of high blood pressure?",
        "What are the symptoms of low blood pressure?",
    ),
    (
        "Which lane do I use to turn left at a roundabout?",
        "Which lane do I use to turn right at a roundabout?",
    ),
    ("How do I zoom in on a photo?", "How do I zoom out on a photo?"),
    ("Can I check in early?", "Can I check out early?"),
    ("How do I set up an inbound firewall rule?", "How do I set up an outbound firewall rule?"),
    ("Why are my incoming calls dropped?", "Why are my outgoing calls dropped?"),
    ("Will interest rates go up this year?", "Will interest rates go down this year?"),
    ("What time zone is the east coast in?", "What time zone is the west coast in?"),
    ("Is the pain in my left arm serious?", "Is the pain in my right arm serious?"),
    ("How do I align text vertically?", "How do I align text horizontally?"),
    # session 44's review (verifier 0.989-0.996), English and Chinese
    ("What are signs of an overactive thyroid?", "What are signs of an underactive thyroid?"),
    ("Are taxes included in the price?", "Are taxes excluded from the price?"),
    ("How do I import my bookmarks?", "How do I export my bookmarks?"),
    ("What is the input voltage?", "What is the output voltage?"),
    ("Which planet is nearest to the sun?", "Which planet is farthest from the sun?"),
    ("What does a SQL LEFT JOIN return?", "What does a SQL RIGHT JOIN return?"),
    ("Why did my payment succeed?", "Why did my payment fail?"),
    ("进口关税是多少", "出口关税是多少"),
    ("输入电压是多少", "输出电压是多少"),
    ("哪颗行星离太阳最近", "哪颗行星离太阳最远"),
    ("一年中哪天白天最长", "一年中哪天白天最短"),
    # 前 / 后 right after what they are before or after (the ``order`` pair)
    ("饭前可以吃布洛芬吗", "饭后可以吃布洛芬吗"),
    ("税前工资一万要交多少税", "税后工资一万要交多少税"),
    ("术前需要禁食多久", "术后需要禁食多久"),
    # session 50's misfire hunt (verifier 0.985-0.997): comparatives and the whole / a part
    ("How do I make the font bigger?", "How do I make the font smaller?"),
    ("Can I get a longer warranty?", "Can I get a shorter warranty?"),
    ("Is a heavier bag allowed on board?", "Is a lighter bag allowed on board?"),
    ("How do I make the screen brighter?", "How do I make the screen darker?"),
    ("How do I speed up my uploads?", "How do I slow down my uploads?"),
    ("Do I get a full refund if I cancel?", "Do I get a partial refund if I cancel?"),
    ("What is the least expensive plan?", "What is the most expensive plan?"),
    ("Is the whole trip covered by insurance?", "Is part of the trip covered by insurance?"),
    ("怎么把字体调大", "怎么把字体调小"),
    ("能换更长的数据线吗", "能换更短的数据线吗"),
    ("取消订单能全额退款吗", "取消订单能部分退款吗"),
    # 前 / 后 after the events of a job, a school year, a contract
    ("离职前要办什么手续", "离职后要办什么手续"),
    ("保单续保前可以退保吗？", "保单续保后可以退保吗？"),  # session 52
    ("会员到期前可以退款吗", "会员到期后可以退款吗"),
    ("毕业前可以申请吗", "毕业后可以申请吗"),
    ("签约前可以退定金吗", "签约后可以退定金吗"),
    # session 51's misfire hunt (served at verifier 0.984-0.996)
    ("Does short-term disability cover surgery?", "Does long-term disability cover surgery?"),
    ("How long does a temporary filling last?", "How long does a permanent filling last?"),
    ("Is mild dehydration dangerous?", "Is severe dehydration dangerous?"),
    ("Is a minor offense on my record?", "Is a serious offense on my record?"),
    ("短期租房要交押金吗", "长期租房要交押金吗"),
    ("轻微划痕可以免费修吗", "严重划痕可以免费修吗"),
    ("这个游戏的最低配置是什么", "这个游戏的推荐配置是什么"),
    # session 52's misfire hunt (served at verifier 0.987-0.996): all of / some of a sum,
    # 全部 / 一部分 of anything
    ("Can I withdraw part of my pension?", "Can I withdraw all of my pension?"),
    ("Can I withdraw some of my deposit early?", "Can I withdraw my whole deposit early?"),
    ("Can I pay part of the invoice now?", "Can I pay the full invoice now?"),
    ("Can I cash out some of my rewards?", "Can I cash out all of my rewards?"),
    ("医保能报销全部药费吗？", "医保能报销一部分药费吗？"),
    ("股票可以卖掉一部分吗？", "股票可以全部卖掉吗？"),
]

SAME = [
    # one pole on one side only is no contrast
    ("Is this a good phone?", "Is this phone worth buying?"),
    ("What are the best budget phones?", "Which budget phones should I buy?"),
    ("I love this phone, how do I reset it?", "How do I reset this phone?"),
    # "like" as a preposition or a polite verb is no evaluation
    ("I would like to change my PIN", "I want to change my PIN"),
    ("What is it like to live in Paris?", "How is life in Paris?"),
    # "how high" and "how low" ask one level from two ends
    ("How high is the air pressure in my tires?", "How low is the air pressure in my tires?"),
    # left as what remains, right as correct: no side
    ("How much money do I have left?", "Is the right amount left in my account?"),
    ("Am I on the right track with my savings?", "Is my savings plan on track?"),
    # one pole on one side, or the same on both (session 44's pairs)
    ("Is tax included?", "Does the price include tax?"),
    ("Why did my payment fail?", "Why was my payment unsuccessful?"),
    ("饭前还是饭后吃药", "吃药应该在饭前还是饭后"),
    # 前 / 后 ending other words: no order
    ("技术前沿有哪些", "有哪些技术前沿"),
    ("目前的利率是多少", "现在利率是多少"),
    ("售后电话是多少", "售后服务电话"),
    # a comparison named on one side, or the same pole in other words
    ("Can I get a bigger room?", "Can I upgrade my room?"),
    ("Can I pay the full amount now?", "Can I pay the full balance now?"),
    ("What is the cheapest phone plan?", "What is the least expensive phone plan?"),
    # the same pole in other words; a minor as a person; a start against an end and
    # required against recommended, which one intent of the shared data asks alike
    ("Can I get a temporary card?", "Can I get a short-term card?"),
    ("Can a minor open an account?", "Is there a serious fee for accounts?"),
    ("早餐几点开始", "自助早餐几点结束"),
    ("at how many miles am i required to get my oil changed", "what is the recommended interval"),
    # "all of" / "some of" only of a sum one holds or owes: BANKING77 files each of these
    # with its other side (the cost check of session 52)
    ("Is the identity check part of bank policy?", "Why do you need all of my ID details?"),
    ("Can I get all of this money back?", "Some of my card payments look wrong, why?"),
    ("Can I withdraw all of my savings?", "How do I withdraw all of my savings?"),
    # "some or all of" asks what "all or some of" asks (the diff review)
    ("Can I withdraw some or all of my pension?", "Can I withdraw all or some of my pension?"),
    ("Can I repay part or all of my loan early?", "Can I repay all or part of the loan early?"),
]


def test_words_that_only_look_like_a_direction() -> None:
    def poles(text: str) -> set[str]:
        return {v for v in extract_entities(text).get("polarity", ()) if v.startswith("antonym_")}

    assert poles("How do I send money with Western Union?") == set()  # a name, not a side
    assert poles("How do I cash in my card rewards?") == set()  # cashed in or out alike
    assert poles("Which way is the money going?") == set()
    assert poles("Do prices go up in winter?") == {"antonym_level:+"}  # the control
    assert poles("I no longer need my card") == set()  # "no longer": no comparison
    assert poles("Is there a shorter way?") == {"antonym_long:-"}  # the control


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_opposite_poles_refuse(a: str, b: str) -> None:
    assert mismatch(a, b) == "polarity", (extract_entities(a), extract_entities(b))


@pytest.mark.parametrize(("a", "b"), SAME)
def test_one_pole_or_none_matches(a: str, b: str) -> None:
    assert mismatch(a, b) is None, (extract_entities(a), extract_entities(b))


def test_every_antonym_pair_is_a_polarity_pair() -> None:
    assert len({name for name, _, _ in ANTONYMS}) == len(ANTONYMS)
    assert extract_entities("I hate it")["polarity"] == {"positive", "antonym_love:-"}


@pytest.mark.parametrize(
    "text", ["注册后台怎么进", "安装前端要多久", "入住前台在哪", "开通后台权限"]
)
def test_a_front_end_back_end_or_front_desk_is_no_order(text: str) -> None:
    # 前端 / 后台 / 前台 end no event (the diff review of session 52: 注册后台 read "after")
    assert not any(v.startswith("order:") for v in polarity_values(prepare(text)))
