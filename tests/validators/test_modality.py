"""Session 45's review of the default pipeline found these served for each other at
verifier scores of 0.983-0.997 with no entity to stop them: a duty against a choice
(validators/modality.py), all against some, and new opposites, contrast sets and
routes (validators/antonyms.py, contrasts.py, places.py). Each family comes with the
paraphrases it must still let through."""

from __future__ import annotations

import pytest

from tests.validators.conftest import mismatch
from validators import extract_entities

DIFFERENT = [
    # a duty against a choice
    ("Is it required to wear a mask on the plane?", "Is it allowed to wear a mask on the plane?"),
    ("Do I need a visa to visit Japan?", "Can I get a visa to visit Japan?"),
    ("Do I have to create an account to check out?", "Can I create an account to check out?"),
    ("Must I show ID to pick up my order?", "May I show ID to pick up my order?"),
    ("Should I bring my own towel to the gym?", "Can I bring my own towel to the gym?"),
    ("Are children required to wear helmets?", "Are children allowed to wear helmets?"),
    ("Is travel insurance mandatory for the trip?", "Is travel insurance optional for the trip?"),
    ("需要提前订座吗？", "可以提前订座吗？"),
    ("开会必须戴口罩吗？", "开会可以戴口罩吗？"),
    # a quantity of a choice against one of a duty (session 46)
    ("How often can I change my PIN?", "How often should I change my PIN?"),
    ("How many times can I reschedule my appointment?", "How many times should I reschedule?"),
    ("How long can I keep my rental car?", "How long should I keep my rental car?"),
    ("可以多久改一次密码", "应该多久改一次密码"),
    ("密码多久可以修改一次", "密码应该多久修改一次"),
    ("一年可以改几次手机号", "一年应该改几次手机号"),
    # all against some
    ("Do all plans include priority support?", "Do any plans include priority support?"),
    ("Are all rooms non-smoking?", "Are some rooms non-smoking?"),
    ("所有套餐都包含优先客服吗？", "部分套餐包含优先客服吗？"),
    ("所有航班都提供餐食吗？", "有的航班提供餐食吗？"),
    # contrast sets
    ("Is the store open on weekends?", "Is the store open on weekdays?"),
    ("周末营业吗？", "工作日营业吗？"),
    ("Is the kids menu available at dinner?", "Is the kids menu available at lunch?"),
    ("Is the restaurant vegan friendly?", "Is the restaurant vegetarian friendly?"),
    ("Does this chocolate bar contain peanuts?", "Does this chocolate bar contain tree nuts?"),
    ("Can I bring a razor in my hand luggage?", "Can I bring a razor in my checked luggage?"),
    ("How do I back up my iPad to iCloud?", "How do I back up my iPhone to iCloud?"),
    ("Is the jacket available in size medium?", "Is the jacket available in size XL?"),
    ("Do you have this sofa in grey?", "Do you have this sofa in black?"),
    ("Is there a student discount on membership?", "Is there a senior discount on membership?"),
    # opposites
    (
        "How do I encrypt a PDF file with a password?",
        "How do I decrypt a PDF file with a password?",
    ),
    ("How do I compress a large video file?", "How do I decompress a large video file?"),
    ("怎么加密PDF文件？", "怎么解密PDF文件？"),
    ("Is the hotel near the airport?", "Is the hotel far from the airport?"),
    ("Is it polite to tip in restaurants in Japan?", "Is it rude to tip in restaurants in Japan?"),
    ("Is the beach public?", "Is the beach private?"),
    ("Is the deposit refunded at check-in?", "Is the deposit refunded at check-out?"),
    # one place, to in one and from in the other
    ("Do you ship to Canada?", "Do you ship from Canada?"),
    # the review of session 45's own rules
    ("Am I required to book in advance?", "Can I book in advance?"),
    ("这个功能需要付费吗", "这个功能可以免费用吗"),  # 能 inside 功能 is no choice
    ("所有的套餐都包含客服吗", "部分套餐包含客服吗"),  # 有的 inside 所有的 is no some
    ("Is there a discount for students?", "Is there a discount for seniors?"),
    ("Does it contain nuts?", "Does it contain peanuts?"),
    ("这个含坚果吗", "这个含花生吗"),
]

SAME = [
    # session 46's controls: an expectation is no duty, "may" / "allowed" is "can"
    ("How often can I change my PIN?", "How frequently am I allowed to change my PIN?"),
    ("How often can I change my PIN?", "How often may I change my PIN?"),
    ("How long should I expect to wait for my card?", "Can I track my card?"),
    ("How long should my new card take to arrive?", "Can I track my new card?"),
    ("How long does a transfer take?", "How long can a transfer take?"),
    ("转账需要多久", "转账应该多久到账"),
    ("How long do I have to return an item?", "How long can I return an item for?"),
    ("How can I reset my password?", "How do I reset my password?"),  # not a modal head
    ("Can I pay by card?", "Is it possible to pay by card?"),  # both choices
    ("Do I need a visa for Japan?", "Is a visa required for Japan?"),  # both duties
    ("Must I show ID?", "Do I have to show ID?"),
    ("需要提前订座吗？", "必须提前订座吗？"),
    ("可以用美元付款吗？", "能用美元付款吗？"),
    ("办签证需要多久", "签证要办多久"),  # 需要 in no yes-no question
    ("Do all plans include support?", "Does every plan include support?"),
    ("Are weekend deliveries free?", "Is delivery free on weekends?"),
    ("Can I bring a razor in my carry-on?", "Can I bring a razor in my hand luggage?"),
    ("Is the hotel near the airport?", "Is the hotel close to the airport?"),
    ("Do you ship to Canada?", "Can you deliver to Canada?"),
    ("Can I send money from the US to Canada?", "Can I send money to Canada from the US?"),
    ("What is my Mac address?", "What is my MAC address?"),  # no device
    ("Do you have this sofa in grey?", "Do you have this sofa in gray?"),
    ("Is there a Black Friday sale?", "Do you have a sale on Black Friday?"),  # no colour
    ("Do you have a student discount?", "Are there discounts for students?"),
    ("Is this a good laptop for a small business?", "Is this laptop good for small businesses?"),
    ("May I ask if I need to book a table in advance?", "Do I need to book a table in advance?"),
    ("Do you have to-go boxes?", "Can I get a to-go box?"),
    ("Is it possible to win 10 tickets?", "Can I win 10 tickets?"),  # no Windows
    ("Is there a discount for students?", "Do you have a student discount?"),
]


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_each_family_refuses_its_opposite(a: str, b: str) -> None:
    assert mismatch(a, b) == "polarity", (extract_entities(a), extract_entities(b))


@pytest.mark.parametrize(("a", "b"), SAME)
def test_and_lets_its_paraphrases_through(a: str, b: str) -> None:
    assert mismatch(a, b) is None, (extract_entities(a), extract_entities(b))
