"""Who acts on whom: the asker against someone else, the polarity pair ``party_agent``.

"Can I send money to a friend?" and "Can a friend send money to me?", "How do I block
someone?" and "What happens if someone blocks me?", "Can I invite a friend?" and "Can
a friend invite me?": the same words around one act, with the asker first its doer
and then its receiver. Both the embedder and the pair verifier read them as one
question (a hunt of session 46 found such pairs served at verifier scores above
0.98), and no entity tells them apart.

A text is read as the asker acting (``+``) when "I" / "we" does one of the acts below
to a party ("a friend", "someone", "my son", "other users"), and as a party acting on
the asker (``-``) when a party does it to "me" / "us". A text read both ways ("I want
my friend to send me money": who sends is no longer clear) or neither way is no
contrast; only two texts read one way each, oppositely, are refused (``default``
"any", as the antonyms). The acts are those a person does to another and that do not
mean the same thing turned round: sending, paying, lending, inviting, referring,
blocking, following, adding, messaging, sharing, gifting, transferring. Not owing or
requesting, whose converse is another act on the list ("I lent my friend money" is
"my friend owes me money"; "request money from a friend" is "get a friend to pay me"),
nor an act "from" a party ("transfer points from my friend": the party gives), nor
"us" after "the" (the US).

Chinese swaps of the same kind (我邀请朋友 / 朋友邀请我) are read by
``validators.roles_zh`` (its relation words), since they keep every character.
"""

from __future__ import annotations

from validators.opposites import ActionPair

_ACT = (
    r"(?:send|sends|sent|sending|pay|pays|paid|paying|lend|lends|lent|lending|loan|loaned"
    r"|invite|invites|invited|inviting|refer|refers|referred|referring"
    r"|block|blocks|blocked|blocking|follow|follows|followed|following|add|adds|added|adding"
    r"|message|messages|messaged|messaging|text|texts|texted|texting|share|shares|shared"
    r"|sharing|gift|gifts|gifted|gifting|transfer|transfers|transferred|transferring"
    r"|give|gives|gave|giving)"
)
# a party other than the asker: "a friend", "someone else", "my son", "other users"
_PARTY = (
    r"(?:(?:a|an|my|our|another|some|other|the|his|her|their|any)\s)?"
    r"(?:(?:close|family|new|old|best)\s)?"
    r"(?:friends?|someone|somebody|anyone|anybody|person|people|users?|contacts?|relatives?"
    r"|family(?:\smembers?)?|colleagues?|co-?workers?|partners?|spouses?|husband|wife"
    r"|son|daughter|kids?|children|child|parents?|mom|mum|dad|brother|sister|roommates?"
    r"|others)(?:\selse)?"
)
# what may stand between: "money to", "$_ to", "it back to"; not "from", which turns
# the act round ("transfer points from my friend", "block messages from other users")
_GAP = r"(?:(?!from\s)[a-z'’$_]+\s){0,4}?"
# "I receive transfers from other people": the asker receives what the party sent
_NOT_RECEIVING = r"(?!(?:receiv|get|got|accept|collect|tak|took|claim|obtain)[a-z'’]*\s)"
_SELF = (
    rf"(?<![a-z'’])(?:i|we)\s(?:{_NOT_RECEIVING}[a-z'’]+\s){{0,3}}?{_ACT}\s{_GAP}(?:to\s|with\s|for\s)?{_PARTY}"
    r"(?![a-z'’])"
)
_OTHER = (
    rf"(?<![a-z'’]){_PARTY}\s(?:[a-z'’]+\s){{0,3}}?{_ACT}\s{_GAP}(?:to\s|with\s|for\s)?(?:me|(?<!the\s)(?-i:us))"
    r"(?![a-z'’])"
)

PARTY_PAIRS = (ActionPair("party_agent", _SELF, _OTHER, "any"),)
