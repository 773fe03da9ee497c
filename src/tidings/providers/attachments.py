"""Loading an attachment's bytes at send time, from where the report lives.

Reports are referenced by id and revision; their bytes are fetched only for
the call that needs them, so retries carry the reference, never the bytes.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

import httpx

from tidings.providers.base import AttachmentRef, ProviderConfigError

MAX_ATTACHMENT_BYTES = 25 * 1024 * 1024
FETCH_TIMEOUT = 10.0


def load_attachment(ref: AttachmentRef) -> bytes:
    location = ref.url_or_path
    scheme = urlparse(location).scheme
    if scheme in ("http", "https"):
        return _fetch(location)
    path = Path(location.removeprefix("file://"))
    if not path.is_file():
        raise ProviderConfigError(
            f"attachment {ref.id} revision {ref.revision} is not at its location"
        )
    data = path.read_bytes()
    _check_size(ref, len(data))
    return data


def _fetch(url: str) -> bytes:
    response = httpx.get(url, timeout=FETCH_TIMEOUT, follow_redirects=False)
    response.raise_for_status()
    return response.content


def _check_size(ref: AttachmentRef, size: int) -> None:
    if size > MAX_ATTACHMENT_BYTES:
        raise ProviderConfigError(
            f"attachment {ref.id} is larger than {MAX_ATTACHMENT_BYTES} bytes"
        )
