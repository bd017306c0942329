"""A service URL as it may be stored and shown: without the secrets it can carry.

The team's system is configured by URL (`system.url`), and a URL can hold credentials: user
info (`http://user:password@host/…`) and secret-looking query or fragment values (`?token=…`,
`&sig=…`, `#access_token=…`). The configuration keeps the URL to call; every dump of it (results,
storage documents, Dagster metadata, fingerprints) and every line that names it shows it
redacted. A secret in the path itself cannot be told from a path: keep it in the query.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

REDACTED = "[redacted]"
# A parameter is secret when its name, lower-cased with separators dropped, holds one of these
# (api_key, X-Amz-Signature, client_secret, access_token, passwd, sessionid, jwt, ...).
_SECRET_NAME = re.compile(r"token|key|secret|sig|pass|pwd|auth|credential|session|jwt|bearer|cookie")


def secret_name(name: str) -> bool:
    return _SECRET_NAME.search(re.sub(r"[^a-z0-9]", "", name.lower())) is not None


def _parameters(text: str) -> str:
    """`a=1&token=x` with every secret-looking value replaced; the rest as written."""
    shown = []
    for part in text.split("&"):
        name, equals, _ = part.partition("=")
        shown.append(f"{name}={REDACTED}" if equals and secret_name(name) else part)
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
