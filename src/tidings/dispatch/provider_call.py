"""One provider call, timed and counted, whatever the adapter does.

An adapter that raises must not read as "not sent": only errors raised
before any request (configuration, an attachment too large) say so.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from tidings.observability.process_metrics import outcome_of, record_provider_call
from tidings.providers.base import ProviderAdapter
from tidings.providers.errors import AttachmentTooLarge, ProviderConfigError
from tidings.providers.outcomes import Indeterminate, RejectCode, Rejected, Retryable, SendResult

log = logging.getLogger("tidings.worker")
CONFIG_RETRY_SECONDS = 60.0


def call_provider(adapter: ProviderAdapter, message: Any, key: str) -> SendResult:
    started = time.monotonic()
    result: SendResult | None = None
    try:
        result = _send(adapter, message, key)
        return result
    finally:
        seconds = time.monotonic() - started
        record_provider_call(adapter.name, message.channel, outcome_of(result), seconds)


def _send(adapter: ProviderAdapter, message: Any, key: str) -> SendResult:
    try:
        return adapter.send(message, key)
    except AttachmentTooLarge:  # before any request, and no retry makes it smaller
        return Rejected(RejectCode.ATTACHMENT_TOO_LARGE, "attachment too large")
    except ProviderConfigError as exc:  # raised before any request: certainly not sent
        log.error("adapter %s is misconfigured: %s", adapter.name, exc)
        return Retryable(RejectCode.PROVIDER_ERROR, CONFIG_RETRY_SECONDS, "configuration")
    except Exception as exc:  # an adapter bug must not read as "not sent"
        log.error("adapter %s raised %s", adapter.name, type(exc).__name__)
        return Indeterminate(RejectCode.PROVIDER_ERROR, type(exc).__name__)
