"""A service URL is stored and shown without its secrets (providers/url_redaction.py): user info
always, secret-looking query and fragment values, and the model configuration's every dump."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipeline.providers.api_base import ApiAccess
from eval_pipeline.providers.models import ModelConfig, legacy_notice
from eval_pipeline.providers.system_target import HttpTarget, make_target
from eval_pipeline.providers.url_redaction import REDACTED, redact_url

SECRET_URL = "http://svc-user:pa%40ss-one@127.0.0.1:8080/answer?mode=fast&token=tok-two&X-Amz-Signature=sig-3"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://host.example/answer", "https://host.example/answer"),
        ("http://user:pw@h:1/a", f"http://{REDACTED}@h:1/a"),
        ("http://user@h/a", f"http://{REDACTED}@h/a"),
        ("http://h/a?x=1&api_key=k&b=2", f"http://h/a?x=1&api_key={REDACTED}&b=2"),
        (
            "http://h/a?sig=s&Password=p&access_token=t",
            f"http://h/a?sig={REDACTED}&Password={REDACTED}&access_token={REDACTED}",
        ),
        ("http://h/a?client-secret=c&flag", f"http://h/a?client-secret={REDACTED}&flag"),
        ("http://h/cb#access_token=t&state=s", f"http://h/cb#access_token={REDACTED}&state=s"),
        ("http://[::1]:80/x?key=k", f"http://[::1]:80/x?key={REDACTED}"),
        ("http://[::1/x", REDACTED),  # not a URL: nothing of it is shown
    ],
)
def test_credentials_and_secret_values_are_redacted(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_every_dump_of_a_model_shows_the_url_redacted_and_calls_the_whole_one() -> None:
    cfg = ModelConfig.model_validate({"key": "team", "system": {"kind": "http", "url": SECRET_URL}})
    assert cfg.system is not None and cfg.system.url == SECRET_URL  # what the target calls
    target = make_target(cfg)  # the client calling the whole URL, and how it reaches it
    assert isinstance(target, HttpTarget) and target.url == SECRET_URL
    shown = [cfg.model_dump_json(), str(cfg.model_dump()), str(cfg.model_dump(mode="json")), repr(cfg)]
    for dumped in [*shown, repr(target), repr(ApiAccess(base_url=SECRET_URL))]:
        for secret in ("svc-user", "pa%40ss-one", "tok-two", "sig-3"):
            assert secret not in dumped
    assert cfg.model_dump(mode="json")["system"]["url"] == (
        f"http://{REDACTED}@127.0.0.1:8080/answer?mode=fast&token={REDACTED}&X-Amz-Signature={REDACTED}"
    )


def test_the_older_http_forms_notice_names_the_url_redacted() -> None:
    body = {
        "key": "team",
        "embedder": {"kind": "http"},
        "reranker": {"kind": "http"},
        "http": {"url": SECRET_URL},
    }
    notice = legacy_notice(Path("models.yaml"), ModelConfig.model_validate(body))
    assert "tok-two" not in notice and "pa%40ss-one" not in notice and f"token={REDACTED}" in notice
