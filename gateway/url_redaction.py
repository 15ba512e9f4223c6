"""URLs as logs, errors and the CLI may show them: without a password.

An upstream URL (``CACHEGATE_UPSTREAM_URL``) or the admin URL may carry credentials
(``http://user:secret@host``); a warning at start, ``cachegate doctor`` and the admin
CLI's errors printed them in clear (a review, session 41). The database URLs have
SQLAlchemy's own ``hide_password`` rendering.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def shown(url: str) -> str:
    """``url`` with any password replaced by ``***`` (the user name kept, so the
    operator can tell which one); a string that does not parse as a URL is returned
    with everything before an ``@`` hidden."""
    try:
        parts = urlsplit(url)
        password, number = parts.password, parts.port
    except ValueError:  # e.g. a port that is no number
        return "***@" + url.rsplit("@", 1)[1] if "@" in url else url
    if password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    port = f":{number}" if number is not None else ""
    netloc = f"{user}:***@{host}{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
