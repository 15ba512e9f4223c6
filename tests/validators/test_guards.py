"""Scenario guards: every guard and rule, in English and Chinese, with negatives."""

from __future__ import annotations

import pytest

from validators import GUARDS, Guard, GuardMatch, UnknownGuardError, first_guard

FIRES = [
    # time_sensitive
    ("time_sensitive", "now", "What is the price right now?"),
    ("time_sensitive", "now", "Is the branch currently open?"),
    ("time_sensitive", "now", "现在几点"),
    ("time_sensitive", "now", "目前的利率是多少"),
    ("time_sensitive", "latest", "What is the latest iPhone?"),
    ("time_sensitive", "latest", "最新的政策是什么"),
    ("time_sensitive", "latest", "What is the latest news on the merger?"),
    ("time_sensitive", "latest", "What are the latest interest rates?"),
    ("time_sensitive", "current_value", "What's the current price of gold?"),
    ("time_sensitive", "current_value", "today's score for the Lakers"),
    ("time_sensitive", "current_value", "实时路况怎么样"),
    ("time_sensitive", "today_status", "Is the store open today?"),
    ("time_sensitive", "today_status", "今天营业吗"),
    ("time_sensitive", "news", "any news about the merger?"),
    ("time_sensitive", "news", "今天有什么新闻"),
    ("time_sensitive", "markets", "What is Apple's stock price?"),
    ("time_sensitive", "markets", "what's the exchange rate for euros"),
    ("time_sensitive", "markets", "今日股价多少"),
    ("time_sensitive", "markets", "美元汇率是多少"),
    ("time_sensitive", "weather", "Will it rain? What's the weather like?"),
    ("time_sensitive", "weather", "明天天气如何"),
    ("time_sensitive", "weather", "What is the weather like in Paris today?"),
    ("time_sensitive", "clock", "what time is it in dallas"),
    ("time_sensitive", "clock", "今天几号"),
    ("time_sensitive", "traffic", "how's traffic on I-95"),
    ("time_sensitive", "traffic", "去机场的路况"),
    # personalized
    ("personalized", "my_status", "Where is my order?"),
    ("personalized", "my_status", "Why was my card declined?"),
    ("personalized", "my_status", "My card has not arrived yet."),
    ("personalized", "my_status", "Has my transfer gone through yet?"),
    ("personalized", "own_transaction", "The payment I made yesterday is still pending"),
    ("personalized", "my_value", "What's my credit score?"),
    ("personalized", "my_value", "when is my next payday"),
    ("personalized", "my_value", "track my package please"),
    ("personalized", "first_person", "How much do I owe?"),
    ("personalized", "first_person", "when do i get paid"),
    ("personalized", "first_person", "I was charged twice for the same coffee"),
    ("personalized", "command", "transfer $100 from checking to savings"),
    ("personalized", "command", "Can you set an alarm for 7am"),
    ("personalized", "my_data_zh", "我的账户被锁了"),
    ("personalized", "my_data_zh", "我的订单到哪了"),
    ("personalized", "my_data_zh", "我还有多少钱"),
    ("personalized", "pii", "Send the receipt to jane@example.com"),
    ("personalized", "pii", "Call me at +1 555-123-4567"),
    ("personalized", "pii", "请打13812345678"),
    ("personalized", "pii", "Is order 12345 shipped?"),
    ("personalized", "pii", "card ending in 4242"),
    ("personalized", "pii", "IBAN GB82 WEST 1234 5698 7654 32"),
    # traditional Chinese forms of the words the rules know (folded by prepare)
    ("time_sensitive", "weather", "天氣怎麼樣"),
    ("time_sensitive", "now", "現在幾點"),
    ("time_sensitive", "markets", "今天股價"),
    ("time_sensitive", "markets", "匯率多少"),
    ("personalized", "my_data_zh", "我的餘額是多少"),
    ("high_risk", "medical", "我應該吃什麼藥"),
    # numeric_computation: Unicode operators, spaced dashes, "x", roots, "**"
    ("numeric_computation", "expression", "what is 8 − 3"),
    ("numeric_computation", "expression", "what's 8−3?"),
    ("numeric_computation", "expression", "what is 8 – 3"),
    ("numeric_computation", "expression", "what is 8-3"),
    ("numeric_computation", "expression", "what is 12/4?"),
    ("numeric_computation", "expression", "what is 3 x 4"),
    ("numeric_computation", "expression", "what is 3x4"),
    ("numeric_computation", "expression", "what is 3 × 4"),
    ("numeric_computation", "expression", "what is 3 · 4"),
    ("numeric_computation", "expression", "what is 3 ⋅ 4"),
    ("numeric_computation", "expression", "what is 16 ** 2"),
    ("numeric_computation", "expression", "what is √16"),
    ("numeric_computation", "keyword", "Calculate the interest on a loan"),
    ("numeric_computation", "keyword", "帮我计算一下利息"),
    # a number to work on keeps a method question a computation
    ("numeric_computation", "keyword", "How is the interest on 5000 dollars calculated?"),
    ("numeric_computation", "keyword", "5000元的利息怎么计算"),
    ("numeric_computation", "expression", "how much is 3*7"),
    ("numeric_computation", "expression", "what is 400 times 2"),
    ("numeric_computation", "expression", "3 + 4 = ?"),
    ("numeric_computation", "expression", "三乘以七"),
    ("numeric_computation", "expression", "100除以4"),
    ("numeric_computation", "keyword", "100减去4等于多少"),
    ("numeric_computation", "operation", "divide 100 by 12"),
    ("numeric_computation", "operation", "how many teaspoons is 3 tablespoons"),
    ("numeric_computation", "operation", "how many pesos in one dollar"),  # today's rate
    ("numeric_computation", "percent_of", "what is 15% of 200"),
    ("numeric_computation", "percent_of", "百分之十五是多少"),
    ("numeric_computation", "how_much_is", "how much is 30 usd in euros"),
    ("numeric_computation", "how_much_is", "convert 20 miles to km"),
    ("numeric_computation", "operation", "convert miles to km"),
    ("numeric_computation", "operation", "convert usd to eur"),
    ("time_sensitive", "latest", "What is the latest version of the app?"),
    ("time_sensitive", "latest", "Which is the latest version and how do I install it?"),
    ("time_sensitive", "latest", "最新版本是多少"),
    ("time_sensitive", "markets", "What is the exchange rate for euros to dollars?"),
    ("time_sensitive", "markets", "What's the exchange rate today?"),
    ("time_sensitive", "markets", "美元兑人民币汇率多少"),
    ("time_sensitive", "clock", "What's the time in Tokyo?"),
    ("time_sensitive", "now", "现在美元兑人民币汇率是多少"),
    ("time_sensitive", "now", "目前有货吗"),
    ("time_sensitive", "now", "请问现在办会员卡什么价格？"),
    ("time_sensitive", "now", "what's the song currently playing"),
    ("numeric_computation", "keyword", "solve 3x + 5 = 11"),
    ("numeric_computation", "keyword", "help me solve this math equation"),
    ("numeric_computation", "operation", "what is the answer to this equation"),
    # high_risk: advice about someone's situation
    ("high_risk", "medical", "How much aspirin should I take for my headache?"),
    ("code_generation", "request", "Write a Python function to reverse a string"),
    ("code_generation", "request", "Can you generate a regex for email addresses?"),
    ("code_generation", "request", "give me a bash one-liner to count lines"),
    ("code_generation", "request", "用python写一个排序"),
    ("code_generation", "request", "写一个函数计算斐波那契数列"),
    ("code_generation", "code_text", "for i in range(3):\n    x = i\n    print(x)"),
    ("code_generation", "code_text", "```js\nconsole.log(1)\n```"),
    ("code_generation", "code_text", "SELECT name FROM users WHERE id = 3"),
    ("high_risk", "medical", "I have a fever and chest pain, what should I do?"),
    ("high_risk", "medical", "Is it safe to take ibuprofen while pregnant?"),
    ("high_risk", "medical", "这个药一天吃几次"),
    ("high_risk", "medical", "我头痛应该吃什么药"),
    ("high_risk", "medical", "do i need any shots before i travel to peru"),
    ("high_risk", "legal", "Can I sue my landlord?"),
    ("high_risk", "legal", "I got fired, can I sue?"),
    ("high_risk", "legal", "Is it legal for us to record our customers' calls?"),  # "us"
    ("high_risk", "legal", "Can a lawyer help us sue the US company?"),
    ("high_risk", "legal", "合同纠纷怎么处理"),
    ("high_risk", "legal", "房东不退押金怎么办"),
    ("high_risk", "legal", "房子漏水好几周了房东都不管，我该怎么办？"),
    ("high_risk", "legal", "房东不让我退租怎么办"),
    ("high_risk", "legal", "我和房东闹矛盾了怎么办"),
    ("high_risk", "medical", "Can I refill my prescription early? I take 50mg of sertraline"),
    (
        "high_risk",
        "medical",
        "I need to book an appointment because I have chest pain, should I go?",
    ),
    ("high_risk", "medical", "孩子发烧39度，怎么预约挂号"),
    ("time_sensitive", "now", "现在一美元换多少人民币"),
    ("time_sensitive", "now", "现在还开着吗"),
    ("time_sensitive", "markets", "What is the USD to EUR exchange rate? Explain briefly."),
    ("time_sensitive", "clock", "What is the time for the next train?"),
    ("high_risk", "medical", "Can I take my prescription with alcohol?"),
    ("high_risk", "medical", "What dose of my prescription should I take?"),
    ("high_risk", "legal", "这样做违法吗"),
    ("high_risk", "medical", "Should I see a doctor for my headache?"),
    ("high_risk", "medical", "How do I see a doctor about my chest pain?"),
    # the diff review of session 50: still advice
    ("high_risk", "medical", "How can I see a doctor about suicidal thoughts?"),
    ("high_risk", "medical", "How do I see a doctor for my anxiety?"),
    ("high_risk", "medical", "Can I get antibiotics without a prescription for my UTI?"),
    ("high_risk", "medical", "Can I buy codeine without a prescription?"),
    ("time_sensitive", "latest", "Who won at the latest Olympics?"),
    ("time_sensitive", "latest", "What is the latest return policy?"),
    ("time_sensitive", "latest", "What's the latest check-in guidance for COVID?"),
    ("time_sensitive", "latest", "What's the latest you can tell me about the outage?"),
    ("high_risk", "financial_advice", "Should I invest in bitcoin?"),
    ("high_risk", "financial_advice", "Which stocks should I buy?"),
    ("high_risk", "financial_advice", "给我一些投资建议"),
    ("high_risk", "financial_advice", "这只股票该不该买"),
]

QUIET = [
    # weather as a policy's condition, not today's state (session 48's misfire hunt)
    ("time_sensitive", "Can I get a full refund if the airline cancels because of bad weather?"),
    ("time_sensitive", "Are weather-related delays compensated?"),
    ("time_sensitive", "因天气原因航班取消可以退款吗"),
    # how to see a doctor, about nothing named (session 50)
    ("high_risk", "How do I see a doctor on the weekend?"),
    ("high_risk", "Where can I see a doctor tonight?"),
    # "at the latest" ending a clause
    ("time_sensitive", "Do I have to submit it by Friday at the latest, or Monday?"),
    # "latest" as a deadline, a policy (session 50's misfire hunt)
    ("time_sensitive", "What is the latest I can check in?"),
    ("time_sensitive", "What's the latest time I can cancel a reservation?"),
    ("time_sensitive", "What is the latest check-out time?"),
    ("time_sensitive", "What is the latest time to return an item?"),
    ("time_sensitive", "Do I have to submit it by Friday at the latest?"),
    # questions about codes, and everyday verbs with a programming noun's homonym
    ("code_generation", "How do I generate a new PIN code?"),
    ("code_generation", "I didn't receive my verification code"),
    ("code_generation", "What is the SWIFT code of my bank?"),
    ("code_generation", "Where do I enter the promo code?"),
    ("code_generation", "How do I write a check?"),
    ("code_generation", "how to make a class reservation"),
    ("code_generation", "how do I fix my credit score"),
    ("code_generation", "我的验证码没收到"),
    # the same shapes that are not arithmetic: ranges, sizes, codes, traditional idioms
    ("numeric_computation", "Is delivery 5-10 days?"),
    ("numeric_computation", "what is 5-10 days in business days"),
    ("numeric_computation", "Can I open an account at ages 18-25?"),
    ("numeric_computation", "call 555-1234"),
    ("numeric_computation", "How do I fix error COVID-19?"),
    ("numeric_computation", "what is a 3x4 photo"),
    ("numeric_computation", "Is 2x speed available?"),
    ("numeric_computation", "what happened on 12/4 last year"),
    ("time_sensitive", "怎麼重置密碼"),
    ("personalized", "餘額寶是什麼"),
    ("time_sensitive", "How do I reset my password?"),
    ("time_sensitive", "What should I do with my old card?"),
    ("time_sensitive", "怎么重置密码"),
    ("time_sensitive", "Where do you live?"),
    ("personalized", "How do I reset a password?"),
    ("personalized", "What is the fee for international transfers?"),
    ("personalized", "do I need form w2 for taxes"),
    ("personalized", "where is flight dl123"),
    ("personalized", "国际转账手续费是多少"),
    # procedural questions that merely say "my" (issue 12, seed 003's 答案因人而异)
    ("personalized", "How do I update my billing address?"),
    ("personalized", "How do I reset my password?"),
    ("personalized", "How do I close my account?"),
    ("personalized", "I want to close my account"),
    ("personalized", "How can I check my balance?"),
    ("personalized", "How can I improve my credit score?"),
    ("personalized", "How can I track my package?"),
    ("personalized", "My card is about to expire, what do I do?"),
    ("personalized", "How much can I top up?"),
    ("personalized", "Why do transfers carry a fee?"),
    ("personalized", "怎么修改我的收货地址"),
    ("personalized", "如何查询我的余额"),
    ("numeric_computation", "How many cards can I have?"),
    ("numeric_computation", "How many calories are in a banana?"),  # one fact (session 47)
    ("numeric_computation", "how many teaspoons is one tablespoon"),
    ("numeric_computation", "How many ounces in a cup?"),
    ("numeric_computation", "Transfers take 3-5 business days"),
    ("numeric_computation", "Is the branch open on 3/5?"),
    ("numeric_computation", "Call 555-123-4567"),
    ("numeric_computation", "怎么开户"),
    ("high_risk", "How do I buy crypto in the app?"),
    ("high_risk", "Where is the food court?"),
    ("high_risk", "怎么修改密码"),
    ("high_risk", "What is the exchange rate?"),
    ("high_risk", "What are the side effects of aspirin?"),
    ("high_risk", "What are the symptoms of flu?"),
    ("high_risk", "Is it legal to record a call?"),
    ("high_risk", "阿司匹林有哪些副作用"),
    ("high_risk", "头痛是什么症状"),
    # pharmacy and clinic administration, a stay's landlord (session 46)
    ("high_risk", "How do I refill my prescription?"),
    ("high_risk", "Can someone else pick up my prescription?"),
    ("high_risk", "How do I book an appointment with my doctor?"),
    ("high_risk", "药店扫我的医保码提示失败"),
    ("high_risk", "医生让我出院了，可是不知道怎么结算费用"),
    ("high_risk", "民宿房东联系不上怎么办"),
    ("high_risk", "I'm sick of waiting for my card"),
    ("high_risk", "How do I dispute a charge on my card?"),
    # "US" is the country, not "us" (a review found it read as the asker's situation)
    ("high_risk", "What is the legal drinking age in the US?"),
    ("high_risk", "Is it legal to work remotely from the US?"),
    # how a fee is worked out, with nothing to work on: a policy, not a computation
    ("numeric_computation", "How are shipping costs calculated?"),
    ("numeric_computation", "How is the late fee calculated?"),
    ("numeric_computation", "How do you calculate compound interest?"),
    ("numeric_computation", "运费怎么计算？"),
    # "convert" a file, a format or money in the app: how-to questions (session 46)
    ("numeric_computation", "convert PDF to Word"),
    ("numeric_computation", "How do I convert a PDF to Word?"),
    ("numeric_computation", "Can I convert money into different currencies?"),
    # how to update to the newest version: the steps do not change with each release
    ("time_sensitive", "How do I update the app to the latest version?"),
    ("time_sensitive", "Where can I download the latest version?"),
    ("time_sensitive", "How do I keep my app up to date?"),
    ("time_sensitive", "怎么升级到最新版本"),
    # how rates are set, "the time" that is no clock, "solve" a problem (session 46)
    ("time_sensitive", "How are exchange rates calculated?"),
    ("time_sensitive", "Where do you get your exchange rates from?"),
    ("time_sensitive", "Is the exchange rate the same on weekends?"),
    ("time_sensitive", "汇率是怎么算的"),
    ("time_sensitive", "目前支持哪些支付方式"),
    ("time_sensitive", "之前拉黑了一个朋友，现在和好了，怎么恢复"),
    ("time_sensitive", "订单显示已发货，现在不想要了怎么办"),
    ("time_sensitive", "Which countries do you currently support?"),
    ("time_sensitive", "What is the time frame for a refund?"),
    ("time_sensitive", "What's the time limit to dispute a charge?"),
    ("time_sensitive", "what is the time zone of France"),
    ("numeric_computation", "How do I solve a problem with my card?"),
    ("numeric_computation", "Would reinstalling the app solve the problem?"),
    ("numeric_computation", "Explain how the delivery charge is calculated"),
    ("numeric_computation", "运费是根据什么计算的"),
    ("numeric_computation", "利息的计算方式是什么"),
]


@pytest.mark.parametrize(("guard", "rule", "text"), FIRES)
def test_guard_fires_with_its_rule(guard: str, rule: str, text: str) -> None:
    match = GUARDS[guard].check(text)
    assert match is not None, text
    assert (match.guard, match.rule) == (guard, rule), match
    assert match.reason == f"guarded:{guard}"
    assert match.phrase
    assert match.end > match.start


@pytest.mark.parametrize(("guard", "text"), QUIET)
def test_guard_stays_quiet(guard: str, text: str) -> None:
    assert GUARDS[guard].check(text) is None


def test_every_rule_has_a_firing_example() -> None:
    covered = {(g, r) for g, r, _ in FIRES}
    declared = {(g.name, r.name) for g in GUARDS.values() for r in g.rules}
    assert declared == covered
    assert set(GUARDS) == {
        "time_sensitive",
        "personalized",
        "numeric_computation",
        "high_risk",
        "code_generation",
    }
    for guard in GUARDS.values():
        assert isinstance(guard, Guard)
        assert guard.description


def test_first_guard_order_is_deterministic() -> None:
    text = "What is my account balance right now?"  # time_sensitive and personalized
    a = first_guard(text, ["personalized", "time_sensitive"])
    b = first_guard(text, {"time_sensitive", "personalized"})
    assert a == b
    assert a is not None and a.guard == "time_sensitive"
    only = first_guard(text, ["personalized"])
    assert only is not None and only.guard == "personalized"
    assert first_guard(text, []) is None
    assert first_guard("How do I reset my password?", list(GUARDS)) is None


def test_unknown_guard_names_raise() -> None:
    with pytest.raises(UnknownGuardError, match="medical"):
        first_guard("hello", ["medical"])
    with pytest.raises(UnknownGuardError):
        first_guard("hello", ["time_sensitive", "nope"])
    assert isinstance(UnknownGuardError("x"), ValueError)


def test_match_serializes() -> None:
    match = GUARDS["personalized"].check("What is my balance?")
    assert isinstance(match, GuardMatch)
    assert match.to_dict() == {
        "guard": "personalized",
        "rule": "my_value",
        "phrase": "my balance",
        "start": 8,
        "end": 18,
    }
