"""The ``personalized`` guard against seed 003's 强个性化 (validators/guard_personal.py):
it fires when the answer depends on the asker's own data, not on a procedure that merely
says "my", with the cases each review added, both ways."""

from __future__ import annotations

import pytest

from validators import first_guard


@pytest.mark.parametrize(
    ("text", "refused"),
    [
        ("How do I update my billing address?", False),
        ("What is my balance?", True),
        ("怎么修改我的收货地址", False),
        ("我的余额是多少", True),
        # session 45's review: stored and served to the tenant's other users before
        ("What is my tracking number?", True),
        ("When does my subscription renew?", True),
        ("Did you receive my payment?", True),
        ("What plan am I on?", True),
        ("我的订单什么时候到？", True),
        ("我的会员什么时候到期？", True),
        ("为什么扣了我两次钱", True),
        ("帮我取消订单", True),
        # session 46: what to do when an ATM kept the card or someone used it: the same
        # steps for everyone
        ("My card got trapped inside an ATM, what should I do?", False),
        ("What should I do if someone is using my card without my permission?", False),
        # and the asker's own state beside them, a how-to clause too (the diff review)
        ("Why was my card payment cancelled?", True),
        ("i need to know why my card was declined", True),
        ("Has my card arrived yet?", True),
        ("Is my account frozen? How do I unfreeze it?", True),
        ("Why is my transfer still pending? What happens if it fails?", True),
        # session 47: a state supposed in its own clause is the same procedure for all
        ("What happens if my card is declined?", False),
        ("What should I do if my card payment was declined?", False),
        ("If my card gets declined, what should I do?", False),
        ("In case my card is blocked, who do I call?", False),
        # session 48: "what if" supposes a state of the item it names
        ("What if my payment is pending for a week?", False),
        ("What if my top up is reverted?", False),
        ("Why is my payment still pending?", True),  # the control: its state asked
        # and not beyond its clause (the diff review)
        ("What is my balance? What if I spend 50 dollars?", True),
        ("What is my credit limit and what if I go over it?", True),
        ("My transfer from yesterday is still pending, what if it never arrives?", True),
        ("What if I redeem my rewards points now, how many points will I have left?", True),
        # and the asker's own state beside it, or asked whether it holds
        ("Can you check if my transfer was received?", True),
        ("What happens if my card is declined? Why was my card declined yesterday?", True),
        ("My card was declined, why?", True),
        # and their procedural controls
        ("How do I cancel my subscription?", False),
        ("What plans do you offer?", False),
        ("Have you got my size in stock?", False),
        ("帮我查一下退货政策", False),
        ("How do I track my order?", False),
        ("会员怎么续费", False),
        ("如何取消订阅", False),
    ],
)
def test_personalized_means_the_askers_own_data(text: str, refused: bool) -> None:
    match = first_guard(text, ["personalized"])
    assert (match is not None) is refused, match
