"""A service URL as it may be stored and shown: without the secrets it can carry (user info,
secret-looking query or fragment values; what is redacted where: docs/untrusted-text.md). The
configuration keeps the URL to call. A secret in the path itself cannot be told from a path.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

REDACTED = "[redacted]"
# A parameter is secret when its name, lower-cased with separators dropped, holds one of these
# (api_key, X-Amz-Signature, client_secret, access_token, passwd, sessionid, jwt, ...).
_SECRET_NAME = re.compile(r"token|key|secret|sig|pass|pwd|auth|credential|session|jwt|bearer|cookie")


def _parameters(text: str) -> str:
    """`a=1&token=x` with every secret-looking value replaced; the rest as written."""
    shown = []
    for part in text.split("&"):
        name, equals, _ = part.partition("=")
        secret = equals and _SECRET_NAME.search(re.sub(r"[^a-z0-9]", "", name.lower()))
        shown.append(f"{name}={REDACTED}" if secret else part)
    return "&".join(shown)


def redact_url(url: str) -> str:
    """`url` with its user info and its secret-looking query and fragment values redacted."""
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL at all: nothing of it can be told safe to show
        return REDACTED
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rpartition('@')[2]}"
    return urlunsplit(
        (parts.scheme, netloc, parts.path, _parameters(parts.query), _parameters(parts.fragment))
    )
