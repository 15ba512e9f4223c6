"""English minimal pairs for the verifier: one word swapped (train_verifier.py --minimal-pairs).

A review of hand-written FAQ pairs (README, session 38) found the English
cross-encoder blind to a single swapped word: it serves "maximum daily dose of
ibuprofen for adults" against "... for children" (0.985-0.996) and refuses
"change" against "update my password" (0.81-0.92). The shared data rarely
holds such pairs, so this module writes them from training-split questions:

* ``minimal_sibling`` (label 0): one member of a sibling set (buyer / seller,
  debit / credit card, economy / business class, state / federal) replaced by
  another member: same words, another question;
* ``minimal_synonym`` (label 1): one member of a synonym set (change / update /
  modify, buy / purchase, fix / repair) replaced by another: other words, the
  same question. Verb sets swap only before a determiner or pronoun ("change
  my", "buy a"), where the swap keeps the grammar and the sense.

Questions come from the training split only (BANKING77 and CLINC150 intents that
:func:`bench.verifier_pairs.split_of` puts in ``train``, and the English topic
pool, which is training-only); a pair with a side whose text is in the
calibration or evaluation split is dropped. The held-out check is
``bench/data/en_minimal_pairs_eval.jsonl`` (bench/verifier_minimal_eval.py),
written by hand with sibling and synonym sets that are not in these lists.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

from bench.semantic_pairs import Question, load_banking77, load_clinc150, normalized
from bench.verifier_pairs import VPair, split_of
from bench.verifier_pairs_topics import TOPICS, load_questions

SOURCE = "minimal-en"


def _sets_of(text: str) -> tuple[str, ...]:
    """Comma-separated sets, members joined by ``|``."""
    return tuple(s.strip() for s in text.replace("\n", " ").split(",") if s.strip())


# Sibling sets of nouns: each also yields the set of its plurals.
SIBLING_NOUNS = _sets_of(
    """
buyer|seller, employer|employee, landlord|tenant, sender|recipient, borrower|lender,
customer|merchant, husband|wife, teacher|student, driver|passenger, owner|renter,
mother|father, brother|sister, son|daughter, boyfriend|girlfriend, plaintiff|defendant,
debit card|credit card|prepaid card, checking account|savings account,
virtual card|physical card, iphone|android phone, apple pay|google pay,
routing number|account number, credit score|credit limit|credit report,
mortgage|car loan|student loan, income tax|property tax|sales tax, pin|password,
passport|driver's license, flight|train|bus, hotel|hostel, window seat|aisle seat,
carry-on bag|checked bag, departure|arrival, alarm|timer|reminder, laptop|desktop|tablet,
printer|scanner, router|modem, car|truck|motorcycle, tire|brake,
headache|stomachache|toothache, ibuprofen|acetaminophen|aspirin, kidney|liver,
dentist|optometrist, breakfast|lunch|dinner, coffee|tea, chicken|beef|pork, shirt|jacket,
undergraduate|graduate, midterm|final exam, misdemeanor|felony, cat|rabbit,
deposit|withdrawal, upload|download, email|text message, weekday|weekend, doctor|nurse
"""
)
# Other sibling sets (adjectives, adverbs, irregular plurals, fixed phrases): as written.
SIBLING_OTHER = _sets_of(
    """
adult|child, adults|children, men|women, man|woman, boy|girl,
economy class|business class|first class, state law|federal law, state tax|federal tax,
stocks|bonds, domestic|international, local|national, public|private, civil|criminal,
one-way|round-trip, north|south, east|west, upstairs|downstairs, incoming|outgoing,
import|export, morning|evening|afternoon, monthly|annual|weekly, minimum|maximum,
lowest|highest, cheapest|most expensive, fastest|slowest, older|newer, before|after,
install|uninstall, log in|log out, sign in|sign out, enable|disable, activate|deactivate,
lock|unlock, freeze|unfreeze, encrypt|decrypt, deposit|withdraw, send|receive,
sent|received, lend|borrow, rent|buy, sell|buy, increase|decrease, raise|lower, add|remove,
open|close, start|finish, accepted|declined, approved|rejected, online|in person,
health insurance|dental insurance|life insurance, red wine|white wine, temporary|permanent,
full-time|part-time
"""
)
# Synonym verb sets, swapped only before a determiner or pronoun (DETERMINERS).
SYNONYM_VERBS = _sets_of(
    """
change|update|modify|edit, changed|updated|modified|edited,
changing|updating|modifying|editing, cancel|terminate, cancelled|terminated,
canceled|terminated, get|obtain|receive, find|locate, buy|purchase, bought|purchased,
fix|repair, fixed|repaired, remove|delete, removed|deleted, view|see, need|require,
show|display, help|assist, book|reserve, booked|reserved, choose|select|pick,
use|utilize, begin|start, return|send back, verify|confirm, lost|misplaced,
give|provide
"""
)
# Synonym sets swapped anywhere.
SYNONYM_OTHER = _sets_of(
    """
i want to|i would like to|i'd like to, wrong|incorrect, error|mistake, the price|the cost,
information|details|info, phone number|telephone number, cell phone|mobile phone,
big|large, allowed|permitted, talk to|speak to|speak with, usually|typically|normally,
right now|immediately, how fast|how quickly, movie|film, car|vehicle, doctor|physician,
shipping|delivery, maybe|perhaps,
how long does it take to|how much time does it take to, nearest|closest, near me|nearby,
money|funds, trip|journey, can i|could i, refunded|reimbursed
"""
)
# A verb set's swap is skipped when one of these words follows within four words:
# "change my tires" is a repair, "get my card to work" a causative.
NOT_BEFORE = {
    "change": frozenset(
        ["oil", "tire", "tires", "brake", "brakes", "battery", "filter", "wipers", "bulb", "diaper"]
    ),
    "get": frozenset(["to", "done", "back", "rid", "working", "fixed", "started"]),
}
DETERMINERS = frozenset(
    [
        "my",
        "a",
        "an",
        "the",
        "your",
        "this",
        "that",
        "these",
        "those",
        "it",
        "its",
        "our",
        "their",
        "some",
    ]
)


def _plural(word: str) -> str:
    if word.endswith("y") and word[-2:-1] not in set("aeiou"):
        return word[:-1] + "ies"
    return word + ("es" if word.endswith(("s", "sh", "ch", "x")) else "s")


def _sets(nouns: Sequence[str], other: Sequence[str]) -> list[tuple[str, ...]]:
    out = [tuple(s.split("|")) for s in (*nouns, *other)]
    for s in nouns:
        out.append(tuple(" ".join([*m.split()[:-1], _plural(m.split()[-1])]) for m in s.split("|")))
    return out


SIBLING_SETS = _sets(SIBLING_NOUNS, SIBLING_OTHER)
SYNONYM_SETS = _sets((), SYNONYM_OTHER)
VERB_SETS = _sets((), SYNONYM_VERBS)


def _pattern(member: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w'-])" + re.escape(member) + r"(?![\w'-])", re.IGNORECASE)


_PATTERNS: dict[str, re.Pattern[str]] = {}


def _find(member: str, text: str) -> list[re.Match[str]]:
    pat = _PATTERNS.get(member) or _PATTERNS.setdefault(member, _pattern(member))
    return list(pat.finditer(text))


def _fix_article(text: str, at: int, word: str) -> str:
    """``a`` / ``an`` right before position ``at`` agreeing with ``word``."""
    m = re.search(r"(?<![\w'])(a|an|A|An) $", text[:at])
    if m is None:
        return text
    want = "an" if word[:1].lower() in "aeiou" else "a"
    if m.group(1)[0].isupper():
        want = want.capitalize()
    return text[: m.start(1)] + want + text[m.end(1) :]


def swaps(
    text: str, sets: Sequence[tuple[str, ...]], rng: random.Random, guard: bool = False
) -> list[str]:
    """Every way one member of a set found once in ``text`` becomes another member
    (one new text per found member, its replacement drawn with ``rng``). A set with
    two of its members in ``text`` is skipped ("from checking to savings"), and with
    ``guard`` a member only counts before a determiner or pronoun."""
    out: list[str] = []
    for members in sets:
        found = [(m, hits) for m in members if (hits := _find(m, text))]
        if len(found) != 1 or len(found[0][1]) != 1:
            continue
        member, (hit,) = found[0]
        if guard:
            nxt = [w.lower().strip(",.?!;:") for w in text[hit.end() :].split()[:4]]
            if not nxt or nxt[0] not in DETERMINERS:
                continue
            if NOT_BEFORE.get(members[0].removesuffix("d").removesuffix("ing"), set()) & set(nxt):
                continue
        new = rng.choice([m for m in members if m != member])
        if hit.group(0)[:1].isupper():
            new = new[:1].upper() + new[1:]
        changed = _fix_article(text[: hit.start()] + new + text[hit.end() :], hit.start(), new)
        if normalized(changed) != normalized(text):
            out.append(changed)
    return out


def training_questions(shared: Sequence[VPair]) -> list[Question]:
    """Training-split intent questions and the English topic pool, less any text that
    a calibration or evaluation pair of ``shared`` holds."""
    held = {normalized(t) for p in shared if p.split != "train" for t in (p.a, p.b)}
    pool = [
        q
        for q in load_banking77() + load_clinc150()
        if split_of(f"{q.source}:{q.intent}") == "train"
    ]
    if TOPICS["en"].exists():
        pool += load_questions(TOPICS["en"], "en")
    return [q for q in pool if normalized(q.text) not in held]


def minimal_pairs(questions: Sequence[Question], seed: int) -> list[VPair]:
    """Every sibling and synonym pair of ``questions`` (one draw per found member)."""
    rng = random.Random(f"minimal-en:{seed}")
    out: list[VPair] = []
    seen: set[tuple[str, frozenset[str]]] = set()
    for q in questions:
        made = [(0, "minimal_sibling", t) for t in swaps(q.text, SIBLING_SETS, rng)]
        made += [(1, "minimal_synonym", t) for t in swaps(q.text, SYNONYM_SETS, rng)]
        made += [(1, "minimal_synonym", t) for t in swaps(q.text, VERB_SETS, rng, guard=True)]
        for label, kind, text in made:
            key = (kind, frozenset((normalized(q.text), normalized(text))))
            if key in seen:
                continue
            seen.add(key)
            a, b = (q.text, text) if rng.random() < 0.5 else (text, q.text)
            out.append(VPair(a, b, label, kind, "en", "train", SOURCE))
    return out


def training_pairs(shared: Sequence[VPair], n: int, seed: int) -> list[VPair]:
    """``n`` minimal pairs for a run's training sample: half siblings, half synonyms
    (the other kind fills in where one runs short), at most one pair a question and kind."""
    held = {normalized(t) for p in shared if p.split != "train" for t in (p.a, p.b)}
    pairs = [
        p
        for p in minimal_pairs(training_questions(shared), seed)
        if normalized(p.a) not in held and normalized(p.b) not in held
    ]
    rng = random.Random(seed)
    by_kind = {k: [p for p in pairs if p.kind == k] for k in ("minimal_sibling", "minimal_synonym")}
    for group in by_kind.values():
        rng.shuffle(group)
    sib, syn = by_kind["minimal_sibling"], by_kind["minimal_synonym"]
    n_syn = min(len(syn), n // 2)
    n_sib = min(len(sib), n - n_syn)
    n_syn = min(len(syn), n - n_sib)
    return sib[:n_sib] + syn[:n_syn]
