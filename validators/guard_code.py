"""The ``code_generation`` guard (seed 003, 数值敏感：计算、财务、代码生成): code written
for the question, or a question that is itself code, is not served from the cache.

Two questions about code can differ in one character that changes everything (an
operator, an indentation, a name), which neither a sentence embedding nor the
entity rules see; and a generated program is an answer to exactly one request.
The rules ask for a programming noun or a language, so "generate a new PIN code" or
"my verification code" (customer-support questions about codes) stay cacheable.
"""

from __future__ import annotations

from validators.guard_base import A, Guard, Z, en_words, regex_rule

#: Programming languages and formats named as such ("in python", "python code").
_LANG = (
    # not swift: "the SWIFT code of my bank" is a banking question
    r"python|javascript|typescript|java|c\+\+|c#|golang|rust|ruby|php|kotlin|scala"
    r"|bash|shell|powershell|sql|html|css|haskell|perl|matlab|dart|lua|elixir|clojure"
)
#: What a program is called when one is asked for.
_ARTIFACT = (
    # not class or module ("make a class reservation")
    r"function|script|program|method|snippet|regex|regular\sexpression|sql\squery"
    r"|one-?liner|unit\stests?|algorithm|dockerfile|makefile|code|source\scode"
)
_VERB = (
    r"write|generate|create|implement|give\sme|show\sme|code|fix|debug"
    r"|refactor|optimi[sz]e|convert|translate|rewrite|complete"
)

CODE_GENERATION = Guard(
    "code_generation",
    "code written for the question, or a question that is code",
    (
        regex_rule(
            "request",
            # "write a python function", "generate a regex", "fix this code"
            en_words(_VERB)
            + rf"\s(?:(?:a|an|the|this|that|some|me|my|us)\s){{0,2}}(?:(?:{_LANG}){Z}\s?)?"
            + rf"(?:{_ARTIFACT}){Z}"
            # "... in python", "... using javascript"
            + rf"|{A}(?:{_ARTIFACT})\s(?:in|using|with)\s(?:{_LANG}){Z}"
            + rf"|{A}(?:{_LANG})\s(?:code|function|script|program|snippet|one-?liner){Z}"
            + r"|(?:写|编写|生成|实现|给我)(?:一个|一段|个|段)?\s?(?:"
            + _LANG
            + r")?\s?(?:代码|函数|脚本|程序|正则表达式|正则|算法)"
            + r"|用\s?(?:"
            + _LANG
            + r")\s?(?:写|实现|编写)|代码生成",
        ),
        regex_rule(
            "code_text",
            # a code block, or syntax no question in words has
            r"```|(?m:^\s*(?:def|class)\s+\w+\s*[(:])|\bfunction\s*\w*\s*\([^)]*\)\s*\{"
            r"|#include\s*<|\bconsole\.log\s*\(|\bpublic\s+static\s+void\b"
            r"|\bselect\s+[\w*,\s]+\s+from\s+\w+\s+where\b|(?m:^\s*for\s+\w+\s+in\s+.+:\s*$)",
        ),
    ),
)
