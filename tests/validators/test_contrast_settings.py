"""Contrast sets of inside or outside a boundary, and of who runs a group
(validators/contrast_settings.py): the hand-written pairs session 50's misfire hunt
found served through the defaults (verifier 0.983-0.997) are refused; paraphrases,
a text naming no member and 不在本地 / 在外地 (one place, said two ways) are not."""

from __future__ import annotations

import pytest

from tests.validators.conftest import mismatch
from validators import extract_entities
from validators.polarity import polarity_values
from validators.text import prepare

REFUSED = [
    ("How much is a visit to an in-network doctor?", "How much is an out-of-network doctor?"),
    ("What is the in-state tuition fee?", "What is the out-of-state tuition fee?"),
    ("How long is recovery after inpatient surgery?", "… after outpatient surgery?"),
    ("Is on-campus housing guaranteed?", "Is off-campus housing guaranteed?"),
    ("When does the indoor pool open?", "When does the outdoor pool open?"),
    ("Where is my inbox?", "Where is my outbox?"),
    ("Can the group owner remove a member?", "Can a group member remove the owner?"),
    ("Can an admin reset a group member's password?", "Can a moderator reset a password?"),
    ("省内医保报销比例是多少", "省外医保报销比例是多少"),
    ("校内住宿怎么申请", "校外住宿怎么申请"),
    ("网内通话怎么收费", "网外通话怎么收费"),
    ("室内泳池几点开放", "室外泳池几点开放"),
    ("住院费用怎么报销", "门诊费用怎么报销"),
    ("群主怎么移除群成员", "群成员怎么移除群主"),
    ("How do I log out of the desktop app?", "How do I log out of the mobile app?"),
    ("电脑端怎么退出登录", "手机端怎么退出登录"),
    ("苹果手机怎么下载app", "安卓怎么下载app"),
    # session 52's misfire hunt (served at verifier 0.986-0.997): inside / outside a
    # building, a town or a network, peak / off-peak, 境内 / 境外, 园区内 / 外, 本地 / 外地
    ("Can I smoke inside the hotel?", "Can I smoke outside the hotel?"),
    ("Are pets allowed inside the restaurant?", "Are pets allowed on the restaurant terrace?"),
    ("Is delivery free within the city?", "Is delivery free outside the city?"),
    ("Are calls within the network free?", "Are calls outside the network free?"),
    ("Is the shuttle free during peak hours?", "Is the shuttle free during off-peak hours?"),
    ("How much is a peak-time ticket?", "How much is an off-peak ticket?"),
    ("境外就医可以报销吗？", "境内就医可以报销吗？"),
    ("园区内可以停车吗", "园区外可以停车吗"),
    ("本地学生可以申请这个助学金吗？", "外地学生可以申请这个助学金吗？"),
    ("高峰时段电价是多少", "低谷时段电价是多少"),
]

KEPT = [
    ("Is my doctor in-network?", "Is my doctor in network?"),
    ("How do I find an in-network dentist?", "How do I find a dentist?"),  # one side only
    ("Is there an indoor pool?", "Do you have an indoor swimming pool?"),
    ("我已经毕业不在本地了，成绩单能寄给我吗", "人在外地没法去学校取成绩单怎么办"),
    ("请问户籍不在本地，驾照到期能在工作的城市换吗？", "人在外地驾照要到期，回不去老家怎么办"),
    # outside a place is validators.places' (a country), outside hours no setting; both
    # poles in one text contrast with nothing
    ("Can I call support outside business hours?", "Can I call support inside the app?"),
    ("用电高峰和低谷的电价一样吗", "非高峰时段电价是多少"),
    # outside peak hours and 避开高峰 are off-peak; 非本地 is 外地 (the diff review)
    ("Is the shuttle free outside peak hours?", "Is the shuttle free during off-peak hours?"),
    ("Are tickets cheaper outside of peak times?", "Are off-peak tickets cheaper?"),
    ("高峰期以外的时间票价多少", "非高峰期票价多少"),
    ("避开高峰期出行票价便宜吗", "非高峰期出行票价便宜吗"),
    ("非本地学生可以报名吗", "外地学生可以报名吗"),
    ("非本地户籍人员可以办居住证吗", "外地人可以办居住证吗"),
    ("Can I update my phone number on my computer?", "How do I update my phone number?"),
    ("How do I pay with my phone?", "Can I pay using my phone?"),
    # a phone number or bill is no device; one text naming both devices, in any order
    ("How do I log in with my phone number?", "How do I sign in on the desktop app?"),
    (
        "How do I access my phone's files on my computer?",
        "How do I move files from my phone to my PC?",
    ),
    ("Does the warranty cover the entire phone?", "Is every part of the phone covered?"),
    (
        "What's the difference between in-network and out-of-network care?",
        "How do in-network and out-of-network costs compare?",
    ),
]


@pytest.mark.parametrize(("a", "b"), REFUSED)
def test_another_setting_or_role_is_refused(a: str, b: str) -> None:
    assert mismatch(a, b) == "polarity", (extract_entities(a), extract_entities(b))


@pytest.mark.parametrize(("a", "b"), KEPT)
def test_the_same_setting_or_none_is_kept(a: str, b: str) -> None:
    assert mismatch(a, b) is None, (extract_entities(a), extract_entities(b))


@pytest.mark.parametrize(
    "text",
    [
        "Can I call you outside our office hours?",
        "Is the number within the area code?",
        "Is the store open outside the shop's opening hours?",
        "非高峰时段电价是多少",  # 高峰时 inside it is no peak
        "平峰时段电价是多少",
    ],
)
def test_hours_and_codes_name_no_setting_and_off_peak_only_one(text: str) -> None:
    # (the diff review of session 52: each read as a setting, or as both peak poles)
    values = {v for v in polarity_values(prepare(text)) if v.startswith("contrast_")}
    assert not any(v.startswith(("contrast_indoor", "contrast_region")) for v in values)
    assert len({v for v in values if v.startswith("contrast_peak")}) <= 1, values
