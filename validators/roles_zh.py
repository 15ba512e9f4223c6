"""Chinese questions that name the same two parties around a relation, swapped.

"咖啡比茶健康吗" (is coffee healthier than tea?) and "茶比咖啡健康吗" (is tea
healthier than coffee?) use the same characters; so do "父母可以继承子女的遗产吗" and
"子女可以继承父母的遗产吗" (parents inheriting from children, or children from
parents), "他欠我钱怎么办" and "我欠他钱怎么办". The Chinese verifier scores such pairs
0.993-0.997 (a review, session 44), and no entity tells them apart. A pair is such a
swap when the second text is the first with two spans X and Y exchanged around a
middle G holding a relation word: X + G + Y against Y + G + X. Only then: a question
whose topic comes first ("密码怎么修改" / "怎么修改密码", no middle) or whose words
merely move ("给我打电话" / "打电话给我", no two parties) is no swap. English role
swaps ("my friend owes me" / "I owe my friend") change the words too, and are left to
the verifier.
"""

from __future__ import annotations

import re

#: Relations whose two sides cannot trade places without changing the question.
RELATION = re.compile(
    "比|欠|给|继承|辞退|开除|起诉|投诉|举报|告|借|嫁|娶|还|赔|转账|汇款|付|卖|送|教|雇|管"
    "|属于|大于|小于|多于|少于|高于|低于|换成|转成|兑换成|打败|赢|输给"
    # one person's act on another (session 47: 我邀请朋友 / 朋友邀请我, served as one)
    "|邀请|推荐|关注|拉黑|屏蔽|删除|删了|分享|联系|通知|授权|担保|介绍|发消息|打电话"
    # session 52: what is moved from one to the other (把微信里的钱转到银行卡, 安卓手机的
    # 数据迁移到苹果手机, served as their reverse at 0.995-0.996 in a misfire hunt); not
    # 绑定到 / 连接到 / 关联到, which join both ways (the diff review)
    "|(?:转|迁移|转移|传|移|搬|复制|拷贝|导|存|汇|寄|发|倒)到"
)
#: Past this many characters between the common head and tail no swap is looked for:
#: the search is cubic in it, and two parties of a question are short (a review: a
#: stored text of 8,000 rearranged characters took 4 s a check).
MAX_SWAP_SPAN = 200
_HAN = re.compile(r"[\u4e00-\u9fff]")


def _han(text: str) -> str:
    return "".join(_HAN.findall(text))


def swapped_roles(a: str, b: str) -> bool:
    """Whether ``b`` is ``a`` with the two parties of a relation exchanged (module
    docstring); punctuation, spaces and any Latin text are not read."""
    a, b = _han(a), _han(b)
    if a == b or len(a) != len(b) or sorted(a) != sorted(b) or not RELATION.search(a):
        return False
    start = 0  # the common head and tail are no part of the swap
    while a[start] == b[start]:
        start += 1
    end = len(a)
    while a[end - 1] == b[end - 1]:
        end -= 1
    ma, mb = a[start:end], b[start:end]
    if len(ma) > MAX_SWAP_SPAN:
        return False
    for i in range(1, len(ma) - 1):  # X = ma[:i]
        x = ma[:i]
        if not mb.endswith(x):
            continue
        for j in range(1, len(ma) - i):  # Y = ma[-j:], G = ma[i:-j]
            y, g = ma[len(ma) - j :], ma[i : len(ma) - j]
            if x != y and mb == y + g + x and RELATION.search(g):
                return True
    return False
