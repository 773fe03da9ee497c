"""Loading an attachment's bytes at send time, from where the report lives.

Reports are referenced by id and revision; their bytes are fetched only for
the call that needs them, so retries carry the reference, never the bytes.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

import httpx

from tidings.providers.errors import AttachmentTooLarge, ProviderConfigError
from tidings.providers.messages import AttachmentRef

# The default of TIDINGS_MAX_ATTACHMENT_BYTES.
MAX_ATTACHMENT_BYTES = 25 * 1024 * 1024
FETCH_TIMEOUT = 10.0


def load_attachment(ref: AttachmentRef, max_bytes: int | None = None) -> bytes:
    """The attachment's bytes; AttachmentTooLarge past `max_bytes`.

    The location is the tenant's to choose, so its size is not trusted: a
    URL is streamed and dropped the moment it passes the limit, and a file
    is measured before it is read.
    """
    limit = _limit() if max_bytes is None else max_bytes
    location = ref.url_or_path
    scheme = urlparse(location).scheme
    if scheme in ("http", "https"):
        return _fetch(ref, location, limit)
    path = Path(location.removeprefix("file://"))
    if not path.is_file():
        raise ProviderConfigError(
            f"attachment {ref.id} revision {ref.revision} is not at its location"
        )
    _check_size(ref, path.stat().st_size, limit)
    data = path.read_bytes()
    _check_size(ref, len(data), limit)  # it may have grown in between
    return data


def _limit() -> int:
    from tidings.platform.settings import Settings

    return Settings().max_attachment_bytes


def _fetch(ref: AttachmentRef, url: str, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    with httpx.stream("GET", url, timeout=FETCH_TIMEOUT, follow_redirects=False) as response:
        response.raise_for_status()
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and len(declared) < 20:
            _check_size(ref, int(declared), limit)
        for chunk in response.iter_bytes():
            size += len(chunk)
            _check_size(ref, size, limit)
            chunks.append(chunk)
    return b"".join(chunks)


def _check_size(ref: AttachmentRef, size: int, limit: int) -> None:
    if size > limit:
        raise AttachmentTooLarge(f"attachment {ref.id} is larger than {limit} bytes")
