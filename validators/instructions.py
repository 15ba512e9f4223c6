"""Instructions that shape an answer without changing the question.

"What is the capital of France? Answer in all caps." asks the same thing as the plain
question, and the cached answer ("Paris") is still the wrong one to serve. Kind
``instruction``, one value per instruction found:

* ``case:upper`` / ``case:lower`` / ``case:title``: "in all caps", "in uppercase",
  "in capital letters", "in lowercase", "in title case" (a bare "uppercase letter" is a
  topic: "does my password need an uppercase letter?");
* ``order:reverse``: "in reverse (order)", "backwards";
* ``like:<who>``: "explain like I'm a physicist" → ``like:physicist``, "answer like a
  pirate", "as if I were five" / "ELI5" / "to a five-year-old" → ``like:5``;
* ``format:<f>``: "in JSON", "as a table", "in (three) bullet points", "as a numbered list",
  "write a haiku / poem / limerick / song about …", "answer only yes or no";
* ``length:short`` / ``length:long``: "briefly", "in short", "be concise", "in
  detail" ("step by step" is not read: a how-to answer is steps already);
* ``tone:<t>``: "formally", "in a friendly tone", "sarcastically";
* ``task:<verb>``: a task that opens the text and ends at a colon ("Summarize: …",
  "Fix the spelling: …", "Classify the sentiment: …").

A count of words ("in 50 words") is the ``number`` kind. Languages ("Answer in
Japanese") are the ``language`` kind.

**Rule.** As most kinds: an instruction in either text must be in both. Patterns are
narrow on purpose (a "table" is a format only after "in/as a", "short" only as "in
short" or "short answer"): a question that merely mentions such a word must not lose
its paraphrases.
"""

from __future__ import annotations

import re

from validators.scan import Scanner

_I = re.IGNORECASE
_B = r"(?<![A-Za-z0-9_])"
_E = r"(?![A-Za-z0-9_])"

_SMALL = {
    "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
    "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12",
}  # fmt: skip
_AGE = rf"(?:\d{{1,2}}|{'|'.join(_SMALL)})"

CASE = re.compile(
    rf"{_B}(?:(?:in|with|using)\s(?:all\s)?(?:caps|capitals|capital\sletters|(?P<up>upper)\s?case"
    rf"|(?P<low>lower)\s?case|small\sletters|(?P<title>title)\s?case)"
    rf"|all[\s-]caps|all\scapital\sletters){_E}",
    _I,
)
REVERSE = re.compile(rf"{_B}(?:in\sreverse(?:\sorder)?|backwards?){_E}", _I)
_WHO = r"(?:an?\s|the\s)?(?P<who>[A-Za-z0-9]+)"
# The persona itself; a verb that asks for an answer must come before it in the clause
# (only the persona is masked, so a "not" between them still counts as a negation).
LIKE = re.compile(
    rf"{_B}(?:eli(?P<eli>5)"
    rf"|(?:like|as\sif|as\sthough)\s(?:(?:i'?m|i\sam|i\swere|you'?re|you\sare|you\swere)\s)?{_WHO}"
    rf"|to\s(?:an?\s)?(?P<to>{_AGE}[\s-]year[\s-]old|child|kid|beginner|novice|expert|layman"
    rf"|layperson)s?){_E}",
    _I,
)
_ASKING = re.compile(
    r"(?<![A-Za-z])(?:explain|answer|respond|reply|write|talk|speak|tell\sme|describe)\w*"
    r"\s(?:[^.?!\n]{0,60}\s)?$",
    _I,
)
_LIKING = re.compile(
    r"(?<![A-Za-z])(?:i|you|we|they|would|'d|really|do|don't|dont|should|might)\s$", _I
)
# "Explain why dogs act like wolves", "Describe what it is like to be a pilot": the
# "like" belongs to the question asked about, not to how to answer it.
_INSIDE_QUESTION = re.compile(
    r"(?<![A-Za-z])(?:why|how|what|when|where|who|whom|which|whether|if|act|acts|acted"
    r"|behave[sd]?|look[sd]?|sound[sd]?|feel[s]?|seem[sd]?|is|are|was|were|be|being)"
    r"(?![A-Za-z])",
    _I,
)
_EXPLAINING = re.compile(r"(?<![A-Za-z])(?:explain|describe)\w*\s(?:[^.?!\n]{0,60}\s)?$", _I)

_FORMATS = {
    "json": "json", "yaml": "yaml", "xml": "xml", "csv": "csv", "markdown": "markdown",
    "html": "html", "table": "table", "list": "list", "numbered list": "list",
    "bulleted list": "bullets", "bullet list": "bullets", "bullet points": "bullets",
    "bullet point": "bullets", "bullets": "bullets", "haiku": "haiku", "poem": "poem",
    "limerick": "limerick", "sonnet": "sonnet", "song": "song", "rhyme": "poem",
    "tweet": "tweet", "emojis": "emoji", "emoji": "emoji",
}  # fmt: skip
_FORMAT_RE = "|".join(sorted((re.escape(k).replace(r"\ ", r"\s") for k in _FORMATS), key=len)[::-1])
FORMAT = re.compile(
    rf"{_B}(?:(?:in|as|into|using|with)\s(?:an?\s|the\s)?(?:valid\s|short\s)?(?P<f>{_FORMAT_RE})"
    rf"|(?:write|compose|give)\s(?:me\s)?(?:an?\s)?(?P<w>haiku|poem|limerick|sonnet|song|rhyme)"
    rf"|(?:in|as|with|using|use|into)\s(?:[A-Za-z\x00]+\s){{0,2}}(?P<b>bullet(?:ed)?\s?points?)"
    rf"|(?:only|just)\s(?:with\s|say\s|answer\s)?(?:an?\s)?(?P<yn>yes\sor\sno|yes/no)"
    rf"|(?:answer|respond|reply)\s(?:with\s)?(?:a\s)?(?P<yn2>yes\sor\sno|yes/no)){_E}",
    _I,
)
LENGTH = re.compile(
    rf"{_B}(?:(?P<short>briefly|in\sbrief|in\sshort|short\sanswer|concisely|be\sconcise|tl;?dr)"
    rf"|(?P<long>in\s(?:great\s|more\s|full\s)?detail|detailed\s(?:answer|explanation|response)"
    rf"|elaborate)){_E}",
    _I,
)
_TONES = "formal|informal|casual|friendly|funny|humorous|sarcastic|professional|polite"
TONE = re.compile(
    rf"{_B}(?:in\san?\s(?P<t>{_TONES})\s(?:tone|way|manner|style)"
    rf"|(?P<adv>formally|informally|sarcastically|humorously|politely|professionally)){_E}",
    _I,
)
_TASKS = (
    r"summari[sz]e|translate|paraphrase|rephrase|rewrite|proofread|correct|classify"
    r"|fix\sthe\s\w+|extract\s\w+"
)
# Only the verb is masked: "Translate to Spanish:" still names its language.
TASK = re.compile(rf"(?:^|(?<=\n))\s*(?P<task>{_TASKS})(?=(?:\s[^:\n]{{0,40}})?:)", _I)


_NOT_WHO_WORDS = (
    "this that these those it me you him her them us one so before above below follows to be being"
)
_NOT_WHO = frozenset(_NOT_WHO_WORDS.split())


def _group(m: re.Match[str], *names: str) -> str | None:
    return next((m.group(n) for n in names if m.group(n)), None)


def _case(m: re.Match[str]) -> list[tuple[str, str]]:
    if m.group("low"):
        return [("instruction", "case:lower")]
    return [("instruction", "case:title" if m.group("title") else "case:upper")]


def _like(m: re.Match[str]) -> list[tuple[str, str]] | None:
    if m.group("eli"):
        return [("instruction", "like:5")]
    before = m.string[max(0, m.start() - 80) : m.start()]
    if not (_EXPLAINING if m.group("to") else _ASKING).search(before):
        return None
    if _LIKING.search(before):
        return None  # "tell me, I would like to change my PIN": "like" is the verb
    asked = (_EXPLAINING if m.group("to") else _ASKING).search(before)
    addressed = re.search(r"(?i)\b(?:i'?m|i\s(?:am|were)|you'?re|you\s(?:are|were))\s", m.group())
    inside = asked is not None and _INSIDE_QUESTION.search(asked.group()) is not None
    if inside and not (m.group("to") or addressed):
        return None  # "explain why dogs act like wolves"; "like I'm five" still counts
    who = (m.group("who") or m.group("to") or "").lower()
    first = re.split(r"[\s-]", who)[0]
    if first in _NOT_WHO:
        return None  # "write it like this", "explain like before": no persona
    return [("instruction", "like:" + _SMALL.get(first, first))]


# A format named after "in/as/with" is an instruction only when the clause asks for
# an answer in it ("answer in JSON", "list them as a table"); otherwise it is the
# topic: "how do I center a div in HTML?", "save a DataFrame as CSV".
_ANSWERING = re.compile(
    r"(?<![A-Za-z])(?:answer|respond|reply|write|give|return|output|format|list|present"
    r"|provide|print|put|summari[sz]e)\w*\s(?:[^.?!\n]{0,60}\s)?$",
    _I,
)


def _format(m: re.Match[str]) -> list[tuple[str, str]] | None:
    if m.group("f") or m.group("b"):
        before = m.string[max(0, m.start() - 80) : m.start()]
        if not _ANSWERING.search(before):
            return None
    if _group(m, "yn", "yn2"):
        return [("instruction", "format:yes-no")]
    if m.group("b"):
        return [("instruction", "format:bullets")]
    raw = re.sub(r"\s+", " ", (_group(m, "f", "w") or "").lower())
    return [("instruction", "format:" + _FORMATS[raw])]


def _length(m: re.Match[str]) -> list[tuple[str, str]]:
    return [("instruction", "length:" + ("short" if m.group("short") else "long"))]


def _tone(m: re.Match[str]) -> list[tuple[str, str]]:
    word = (_group(m, "t", "adv") or "").lower()
    word = {"formally": "formal", "informally": "informal", "sarcastically": "sarcastic"}.get(
        word, word.removesuffix("ly")
    )
    return [("instruction", "tone:" + word)]


def _task(m: re.Match[str]) -> list[tuple[str, str]]:
    verb = re.sub(r"\s+", " ", m.group("task").lower()).replace("summarise", "summarize")
    return [("instruction", "task:" + verb.replace(" the ", " ").replace(" ", "-"))]


def extract_instructions(scan: Scanner) -> None:
    """Runs before the numbers: "like I'm five" is a persona, not the number 5."""
    scan.take(TASK, _task)
    scan.take(CASE, _case)
    scan.take(REVERSE, lambda m: [("instruction", "order:reverse")])
    scan.take(LIKE, _like)
    scan.take(FORMAT, _format)
    scan.take(LENGTH, _length)
    scan.take(TONE, _tone)
