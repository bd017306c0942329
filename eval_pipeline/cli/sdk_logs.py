"""The API SDKs' own log lines stay off the console.

voyageai warns through the `voyage` logger about replies it could not read, which Python's
last-resort handler prints to stderr when nothing else is configured; the anthropic SDK and the
HTTP clients log through theirs. Every such fault is retried and reported by eval-pipeline itself
(an errored test's reason, the console summary), so the SDKs' lines would only repeat it raw.
"""

from __future__ import annotations

import logging

SDK_LOGGERS = ("voyage", "anthropic", "httpx", "httpx2", "httpcore", "aiohttp")


def quiet_sdk_loggers() -> None:
    for name in SDK_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
            logger.addHandler(logging.NullHandler())
        logger.propagate = False
