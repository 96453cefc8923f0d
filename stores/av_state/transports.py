"""Which Redis URLs a state store may connect to (the seed's
``validate_transports``).

A ``rediss://`` URL verifies the server's certificate and name, and nothing
may turn that off; the seeds of a cluster must all use one transport, so a
plaintext seed cannot downgrade a TLS cluster. The seed parsed URLs with
redis-rs, whose way to disable verification is the ``#insecure`` fragment;
redis-py's ways are the ``ssl_cert_reqs=none`` and
``ssl_check_hostname=false`` query options. All three are refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import parse_qsl, urlsplit

from stores.av_state.contract import BackendError

PLAINTEXT_SCHEMES = frozenset({"redis", "unix"})
TLS_SCHEMES = frozenset({"rediss"})

# The values redis-py reads as "do not verify" (its ``to_bool`` false strings).
_UNVERIFIED = {"ssl_cert_reqs": {"none"},
               "ssl_check_hostname": {"false", "f", "0", "no", "n"}}


def split_urls(urls: str) -> list[str]:
    """One URL, or a comma-separated list of cluster seeds, as its URLs."""
    return [url.strip() for url in urls.split(",") if url.strip()]


def uses_tls(url: str) -> bool:
    """Whether ``url`` is a TLS transport; ``BackendError`` for a URL that is
    not a Redis URL or that disables certificate verification."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in PLAINTEXT_SCHEMES | TLS_SCHEMES:
        raise BackendError(f"{url!r} is not a Redis URL (redis://, rediss:// or unix://)")
    if scheme in TLS_SCHEMES and _disables_verification(parts.fragment, parts.query):
        raise BackendError("Redis TLS certificate verification cannot be disabled")
    return scheme in TLS_SCHEMES


def _disables_verification(fragment: str, query: str) -> bool:
    if fragment.lower() == "insecure":
        return True
    return any(value.lower() in _UNVERIFIED.get(name.lower(), ())
               for name, value in parse_qsl(query, keep_blank_values=True))


def validate_transports(urls: Sequence[str]) -> None:
    """Refuse ``urls`` (one server, or a cluster's seeds) unless each is a
    Redis URL that keeps TLS verification and all share one transport."""
    previous_tls: bool | None = None
    for url in urls:
        tls = uses_tls(url)
        if previous_tls is not None and previous_tls != tls:
            raise BackendError("Redis Cluster seeds must all use the same transport")
        previous_tls = tls
