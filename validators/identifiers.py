"""Extractors for things that name one object: emails, URLs, phone numbers,
identifiers (order numbers, SKUs, tracking codes, account and card numbers,
IBANs) and software/product versions.

Canonical forms:

* email: lower-cased ``user@example.com``.
* url: scheme and ``www.`` dropped, host lower-cased, trailing ``/`` and
  punctuation dropped: ``https://www.Example.com/a/`` → ``example.com/a``.
* phone: digits only; ``+1`` (NANP, 10 digits after it) and ``+86`` (Chinese
  mobile) prefixes are dropped so ``+1 555-123-4567`` == ``(555) 123-4567``;
  other international numbers keep ``+`` and the country code.
* identifier: upper-cased, spaces and hyphens removed (``abc-123`` ==
  ``ABC123``); the keyword is not part of it (``order #12345`` == ``#12345``);
  masked references keep a star: ``ending in 1234`` / ``尾号1234`` → ``*1234``.
* identifier, lettered: a single capital letter or a Roman numeral after a word that
  names a variant (type, plan, class, tier, grade, option, gate, vitamin, section,
  part, zone, terminal, level, group, category, model, episode), with the word: ``type A`` →
  ``TYPE:A``, ``Type II`` → the number 2 (as "type 2" reads); only upper-case letters
  ("type a password" is none), and ``I`` only at the end of a clause ("which plan I
  should pick" is none).
* version: ``product:version`` with aliases folded (``iOS 10`` → ``ios:10``,
  ``Python 3.11`` → ``python:3.11``, ``node.js 18`` → ``node:18``); a version
  without a product is ``v:2.3.1`` (``v2.3.1``, ``version 2.3.1``, ``版本2.3.1``).
"""

from __future__ import annotations

import re

from validators.scan import Scanner, one

_I = re.IGNORECASE
_A = r"(?<![A-Za-z0-9_])"  # ASCII word start (Chinese characters count as boundaries)
_Z = r"(?![A-Za-z0-9_])"  # ASCII word end

EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}" + _Z
)
_URL_CHARS = r"[^\s<>\"'\x00，。、；！？（）]"
_TLDS = "com|org|net|edu|gov|io|ai|dev|app|co|cn|uk|de|fr|jp|info|biz|me|us|ca|au|in|ru|xyz|tv|ly"
URL = re.compile(
    rf"(?:https?|ftp)://{_URL_CHARS}+"
    rf"|(?<![A-Za-z0-9_.@-])www\.{_URL_CHARS}+"
    rf"|(?<![A-Za-z0-9_.@-])(?:[A-Za-z0-9-]+\.)+(?:{_TLDS})(?![A-Za-z0-9-])(?:/{_URL_CHARS}*)?",
    _I,
)

PHONE = re.compile(
    # international: +1 555-123-4567, +86 138 1234 5678, +44 20 7946 0958
    r"(?<![A-Za-z0-9_+])\+\d{1,3}(?:[\s.-]?\(?\d{1,5}\)?){2,5}(?!\d)"
    # NANP: (555) 123-4567, 555-123-4567, 555.123.4567, 1-800-555-1234
    r"|(?<![A-Za-z0-9_])(?:1[\s.-])?(?:\(\d{3}\)\s?|\d{3}[\s.-])\d{3}[\s.-]\d{4}(?!\d)"
    # Chinese mobile: 13812345678, 138-1234-5678, 138 1234 5678
    r"|(?<![\d-])1[3-9]\d(?:[\s-]?\d{4}){2}(?!\d)"
)

_ID_TOKEN = r"((?>[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?))"
_CURRENCY_AFTER = r"(?!\s?(?:%|percent|dollars?|usd|euros?|eur|pounds?|gbp|yuan|rmb|元|块|美元))"
_EN_ID_KEYWORDS = (
    r"order|invoice|ticket|case|account|acct|a/c|reference|ref|confirmation|booking|reservation"
    r"|tracking|transaction|txn|customer|member(?:ship)?|policy|claim|sku|item|product|serial"
    r"|model|part|flight|card|receipt|shipment|parcel|package|loan|contract|application|incident"
    r"|routing|iban|swift|bic|pnr|po|id"
)
_ZH_ID_KEYWORDS = (
    r"快递单号|物流单号|运单号|订单编号|订单号|订单|单号|账号|帐号|账户|帐户|卡号|工单号|工单"
    r"|编号|流水号|交易号|合同号|发票号|会员号|身份证号|保单号|航班号?|序列号|型号|取件码|验证码"
)
IDENTIFIER = re.compile(
    # keyword-led: "order 12345", "order #12345", "account number: 12345678", "订单号12345";
    # group 1 is set when the keyword carries an explicit marker (number, no., #, id, :)
    rf"(?:{_A}(?:{_EN_ID_KEYWORDS})s?((?:\s+(?:number|no\.?|num|#|id|code))?\s?(?:is\s|[:#]\s?)?)"
    rf"|({_ZH_ID_KEYWORDS})\s?(?:是|为|[:#])?)"
    rf"\s?{_ID_TOKEN}{_CURRENCY_AFTER}"
    # "#12345"
    rf"|(?<![A-Za-z0-9_&])#\s?{_ID_TOKEN}",
    _I,
)
_MASKED_REF = re.compile(
    r"(?:ending\s+(?:in|with)|ends\s+(?:in|with)|last\s+(?:4|four)(?:\s+digits)?(?:\s+(?:is|are|of))?"
    r"|尾号(?:是|为)?|末四位(?:是|为)?|后四位(?:是|为)?)\s?[:：]?\s?(\d{3,6})(?!\d)",
    _I,
)
UPS_TRACKING = re.compile(_A + r"1Z[0-9A-Z]{16}" + _Z, _I)
IBAN = re.compile(
    r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?:\s?[A-Z0-9]{4}){2,7}(?:\s?[A-Z0-9]{1,3})?(?![A-Za-z0-9])"
)
CARD_NUMBER = re.compile(r"(?<![\d.,])\d{4}(?:[\s-]\d{4}){2,3}(?:[\s-]\d{1,3})?(?![\d.,]\d)")
IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.]\d)")
# Hex codes: "error 0x80070005" (a Windows HRESULT), "0xFF".
HEX = re.compile(r"(?<![A-Za-z0-9_])0[xX][0-9A-Fa-f]+(?![A-Za-z0-9_])")
CODE_WITH_DASH = re.compile(_A + r"[A-Za-z]{2,}-\d{2,}[A-Za-z0-9-]*" + _Z)

_PRODUCTS: dict[str, str] = {
    "ios": "ios", "ipados": "ipados", "macos": "macos", "mac os x": "macos", "mac os": "macos",
    "os x": "macos", "osx": "macos", "android": "android", "windows": "windows",
    "ubuntu": "ubuntu", "debian": "debian", "fedora": "fedora", "centos": "centos",
    "rhel": "rhel", "python": "python", "java": "java", "jdk": "java", "node.js": "node",
    "nodejs": "node", "node": "node", "php": "php", "ruby": "ruby", "perl": "perl",
    "golang": "go", "rust": "rust", "kotlin": "kotlin", "scala": "scala", ".net": "dotnet",
    "dotnet": "dotnet", "excel": "excel", "office": "office", "chrome": "chrome",
    "firefox": "firefox", "safari": "safari", "iphone": "iphone", "ipad": "ipad",
    "pixel": "pixel", "playstation": "playstation", "xbox": "xbox", "gpt": "gpt",
    "llama": "llama", "django": "django", "flask": "flask", "react": "react",
    "angular": "angular", "vue": "vue", "rails": "rails", "laravel": "laravel",
    "postgresql": "postgres", "postgres": "postgres", "mysql": "mysql", "redis": "redis",
    "mongodb": "mongodb", "kubernetes": "kubernetes", "k8s": "kubernetes",
    "docker": "docker", "tensorflow": "tensorflow", "pytorch": "torch", "torch": "torch",
    "cuda": "cuda", "xcode": "xcode", "typescript": "typescript", "spark": "spark",
    "kafka": "kafka", "elasticsearch": "elasticsearch", "nginx": "nginx", "微信": "wechat",
    "安卓": "android",
}  # fmt: skip
_PRODUCT_RE = "|".join(re.escape(p) for p in sorted(_PRODUCTS, key=len, reverse=True))
_VERSION_NUM = r"(\d+(?:\.\d+){0,3}[a-z]?)"
VERSION = re.compile(
    rf"(?<![A-Za-z0-9_.])({_PRODUCT_RE})[\s-]?(?:version\s?|ver\.?\s?|v)?{_VERSION_NUM}(?![\d.]\d|[A-Za-z])"
    rf"|{_A}(?:version|ver\.?|v)\s?(\d+(?:\.\d+){{0,3}})(?![\d.]\d|[A-Za-z])"
    rf"|版本\s?(?:号)?\s?[:：]?\s?v?(\d+(?:\.\d+){{0,3}})(?![\d.]\d)"
    rf"|(?<![\d.])v?(\d+(?:\.\d+){{1,3}})\s?版(?:本)?"
    rf"|(?<![A-Za-z0-9_.])(\d+\.\d+\.\d+(?:\.\d+)?)(?![\d.]\d|[A-Za-z])",
    _I,
)


_VARIANT_WORDS = (
    "type|plan|class|tier|grade|option|gate|vitamin|section|part|zone|terminal|level|group|category"
    # session 44: "Tesla Model S / Model X", "Episode IV / V" were served each other's
    "|model|episode"
)
LETTERED = re.compile(
    rf"{_A}((?i:{_VARIANT_WORDS}))\s(?:#\s?)?"
    r"([A-HJ-Z][+-]?(?![A-Za-z0-9_'])|(?:II|III|IV|VI{0,3}|IX|X)(?![A-Za-z0-9_'])"
    r"|I(?=\s?(?:$|[,.;:!?)]|\s(?:and|or|vs)\b)))"
)


_ROMAN = {"I": 1, "II": 2, "III": 3, "IV": 4, "VI": 6, "VII": 7, "VIII": 8, "IX": 9}


def _lettered(m: re.Match[str]) -> list[tuple[str, str]]:
    variant = m.group(2)
    if variant in _ROMAN:
        # "type II diabetes" is "type 2 diabetes": the number kind, as the digit is.
        return [("number", str(_ROMAN[variant]))]
    word = re.sub(r"\s+", " ", m.group(1).lower())
    return [("identifier", f"{word.upper()}:{variant}")]


def _email(m: re.Match[str]) -> list[tuple[str, str]]:
    return [("email", m.group().lower())]


def _url(m: re.Match[str]) -> list[tuple[str, str]] | None:
    raw = m.group().rstrip(".,;:!?)]}'\"")
    low = re.sub(r"^(?:https?|ftp)://", "", raw, flags=_I)
    host, sep, path = low.partition("/")
    host = host.lower()
    host = host.removeprefix("www.")
    value = f"{host}{sep}{path}".rstrip("/")
    return one("url", value)


def phone_canonical(raw: str) -> str | None:
    digits = re.sub(r"\D", "", raw)
    if not 7 <= len(digits) <= 15:
        return None
    if raw.startswith("+"):
        if digits.startswith("1") and len(digits) == 11:
            return digits[1:]
        if digits.startswith("86") and len(digits) == 13 and digits[2] == "1":
            return digits[2:]
        return "+" + digits
    if len(digits) == 11 and digits.startswith("1") and not raw[1:2].isdigit():
        return digits[1:]  # 1-800-555-1234
    return digits


def _phone(m: re.Match[str]) -> list[tuple[str, str]] | None:
    return one("phone", phone_canonical(m.group()))


def _id_value(token: str) -> str:
    return re.sub(r"[\s-]", "", token).upper()


def _identifier(m: re.Match[str]) -> list[tuple[str, str]] | None:
    token = m.group(3) or m.group(4)
    value = _id_value(token)
    if not any(ch.isdigit() for ch in value):
        return None
    # A bare English keyword ("order 500 checks", "card 12") needs a longer token or one
    # that mixes letters and digits; an explicit marker ("order #123", "订单号123") needs 3.
    marked = bool((m.group(1) or "").strip()) or m.group(2) is not None or m.group(4) is not None
    mixed = any(ch.isalpha() for ch in value)
    if len(value) < (3 if marked or mixed else 4):
        return None
    return [("identifier", value)]


def _masked_ref(m: re.Match[str]) -> list[tuple[str, str]]:
    return [("identifier", "*" + m.group(1))]


def _plain_id(m: re.Match[str]) -> list[tuple[str, str]]:
    return [("identifier", _id_value(m.group()))]


def _card(m: re.Match[str]) -> list[tuple[str, str]] | None:
    digits = re.sub(r"\D", "", m.group())
    return one("identifier", digits) if 12 <= len(digits) <= 19 else None


def _hex(m: re.Match[str]) -> list[tuple[str, str]]:
    digits = m.group()[2:].lstrip("0") or "0"
    return [("identifier", "0x" + digits.upper())]


def _ipv4(m: re.Match[str]) -> list[tuple[str, str]] | None:
    parts = m.group().split(".")
    if any(int(p) > 255 for p in parts):
        return None
    return [("identifier", "IP:" + ".".join(str(int(p)) for p in parts))]


def _version(m: re.Match[str]) -> list[tuple[str, str]]:
    if m.group(1):
        product = _PRODUCTS[re.sub(r"\s+", " ", m.group(1).lower())]
        return [("version", f"{product}:{m.group(2).lower()}")]
    number = m.group(3) or m.group(4) or m.group(5) or m.group(6)
    return [("version", f"v:{number}")]


def extract_contacts(scan: Scanner) -> None:
    """Emails, then URLs, then phone numbers (in that order: an email holds a
    domain, and a URL path may hold digits that look like a phone)."""
    scan.take(EMAIL, _email)
    scan.take(URL, _url)
    scan.take(PHONE, _phone)


def extract_identifiers(scan: Scanner) -> None:
    """Identifiers with a keyword or a shape that cannot be anything else."""
    scan.take(_MASKED_REF, _masked_ref)
    scan.take(UPS_TRACKING, _plain_id)
    scan.take(HEX, _hex)
    scan.take(IBAN, _plain_id)
    scan.take(CARD_NUMBER, _card)
    scan.take(IPV4, _ipv4)
    scan.take(IDENTIFIER, _identifier)
    scan.take(CODE_WITH_DASH, _plain_id)
    scan.take(LETTERED, _lettered)


# "Win 11" is Windows 11 (session 45: a version against a name and a number refused the
# pair); only before a Windows release, so "win 2 tickets" stays a verb and a number.
WINDOWS_SHORT = re.compile(
    r"(?<![A-Za-z0-9_.])win[\s-]?(7|8\.1|8|10|11)(?![\d.]\d|[A-Za-z])"
    # what a release is followed by: the end, punctuation, or a word about the system
    # ("win 10 tickets", "win 11 points" stay a verb and a number: a review)
    r"(?=\s*(?:$|[?.!,;:)]|(?:pro|home|enterprise|education|updates?|upgrade|laptop|pc"
    r"|computer|machine|os|system|activation|license|key|install(?:ation)?|version|support"
    r"|and|or|on|from|with)(?![a-z])))",
    _I,
)


def _windows_short(m: re.Match[str]) -> list[tuple[str, str]]:
    return [("version", f"windows:{m.group(1).lower()}")]


def extract_versions(scan: Scanner) -> None:
    scan.take(WINDOWS_SHORT, _windows_short)
    scan.take(VERSION, _version)
