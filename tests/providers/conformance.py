"""The conformance suite every provider adapter must pass (one suite, every adapter).

To run it for an adapter, subclass `AdapterConformance` in a test module and
provide two fixtures: `adapter` (the adapter under test, pointed at its local
peer) and `peer` (an object satisfying `PeerControl` for that peer). A peer
that cannot stage a case raises `pytest.skip` from the method concerned; an
adapter without lookups has those cases skipped by its capability flags, and
a peer whose provider sends no webhooks says so with `webhooks = False` (the
adapter must then refuse webhook requests with ProviderConfigError).
"""

from __future__ import annotations

import uuid
from typing import Any, Literal, Protocol

import pytest

from tidings import Tidings
from tidings.dispatch.call_start import Verdict
from tidings.dispatch.observe import apply_observation
from tidings.dispatch.runner import Worker
from tidings.providers.base import ProviderAdapter
from tidings.providers.errors import InvalidSignature, ProviderConfigError
from tidings.providers.messages import OutboundMessage, WebhookRequest
from tidings.providers.outcomes import (
    Accepted,
    Indeterminate,
    Observation,
    ObservedStatus,
    RejectCode,
    Rejected,
    Retryable,
)

Outcome = Literal["accept", "undeliverable", "rate_limit", "reject", "timeout"]
Signature = Literal["valid", "missing", "wrong_secret", "tampered"]
UNKNOWN_RAW_STATUS = "teleported-by-carrier"


class PeerControl(Protocol):
    retry_after_seconds: float | None  # what the peer promises on a 429, None if nothing
    reject_code: RejectCode  # the normalized code the "reject" outcome must map to
    # Optional: `webhooks = False` when the provider sends none (read with getattr).

    def message(self, outcome: Outcome, channel: str) -> OutboundMessage:
        """A message that, sent next, gets `outcome` (the peer arranges itself)."""

    def undelivered_code(self, channel: str) -> RejectCode:
        """The normalized code the "undeliverable" outcome must end with."""

    def requests_recorded(self, idempotency_key: str) -> int:
        """How many send requests with this key the peer received."""

    def settle(self) -> None:
        """Let every pending status progression reach its final state."""

    def webhook(
        self,
        provider_message_id: str,
        idempotency_key: str,
        raw_status: str,
        *,
        signature: Signature = "valid",
        destination: str | None = None,
    ) -> WebhookRequest:
        """A status event as the provider would POST it; `destination` included if given."""


def new_key() -> str:
    return f"conf-{uuid.uuid4().hex}"


def channel_of(adapter: ProviderAdapter, channel: str) -> str:
    if channel not in adapter.channels:
        pytest.skip(f"{adapter.name} does not send {channel}")
    return channel


def need(flag: bool, what: str) -> None:
    if not flag:
        pytest.skip(f"adapter has no {what}")


def has_webhooks(peer: PeerControl) -> bool:
    return bool(getattr(peer, "webhooks", True))


def _claimed_and_marked(tidings: Tidings, adapter: ProviderAdapter, channel: str) -> Any:
    """An intent claimed through `adapter` and marked "call started"."""
    subject = "Hello" if channel == "email" else None
    tidings.publish_template("conformance", channel=channel, subject=subject, body="Hello")
    recipient = {"ref": "r1", "phone": "+14155550123", "email": "r1@example.com"}
    recipient.pop("email" if channel == "sms" else "phone")
    tidings.notify(
        idempotency_key=new_key(),
        channel=channel,
        recipient=recipient,
        template="conformance",
        purpose="transactional",
        event_class="conformance",
    )
    worker = Worker(tidings.runtime, {channel: adapter}, accounts_factory=None)
    [claimed] = worker.claim(channel, 1)
    assert worker._starts.verdict(claimed) is Verdict.GO
    return worker, claimed


CHANNELS = pytest.mark.parametrize("channel", ["sms", "email"])


class AdapterConformance:
    """Test cases shared by every adapter; subclasses supply `adapter` and `peer`."""

    @CHANNELS
    def test_accepted_send_returns_id_and_peer_saw_one_request(self, adapter, peer, channel):
        key = new_key()
        result = adapter.send(peer.message("accept", channel_of(adapter, channel)), key)
        assert isinstance(result, Accepted)
        assert result.provider_message_id
        assert result.status is ObservedStatus.accepted
        assert peer.requests_recorded(key) == 1

    @CHANNELS
    def test_rate_limit_is_retryable_with_retry_after(self, adapter, peer, channel):
        key = new_key()
        result = adapter.send(peer.message("rate_limit", channel_of(adapter, channel)), key)
        assert isinstance(result, Retryable)
        assert result.code is RejectCode.RATE_LIMITED
        assert result.retry_after_seconds == peer.retry_after_seconds
        assert peer.requests_recorded(key) == 1
        self._never_went_out(adapter, key)

    @CHANNELS
    def test_permanent_rejection_has_a_normalized_code(self, adapter, peer, channel):
        key = new_key()
        result = adapter.send(peer.message("reject", channel_of(adapter, channel)), key)
        assert isinstance(result, Rejected)
        assert result.code is peer.reject_code
        assert peer.requests_recorded(key) == 1
        self._never_went_out(adapter, key)

    def test_ambiguous_timeout_is_indeterminate_and_found_by_key(self, adapter, peer):
        channel = sorted(adapter.channels)[0]
        key = new_key()
        result = adapter.send(peer.message("timeout", channel), key)
        assert isinstance(result, Indeterminate)
        need(adapter.supports_lookup_by_key, "lookup by key")
        found = adapter.find_by_key(key)
        # The provider did take it: reconciliation finds it, so no resend is needed.
        assert found is not None and found.provider_message_id
        assert found.status is ObservedStatus.accepted
        assert peer.requests_recorded(key) == 1

    def test_status_lookup_follows_the_progression(self, adapter, peer):
        need(adapter.supports_lookup, "status lookup")
        channel = sorted(adapter.channels)[0]
        sent = adapter.send(peer.message("accept", channel), new_key())
        assert isinstance(sent, Accepted)
        assert adapter.status(sent.provider_message_id).status is ObservedStatus.accepted
        peer.settle()
        final = adapter.status(sent.provider_message_id)
        assert final.status is ObservedStatus.delivered
        assert final.provider == adapter.name
        assert final.occurred_at is None or final.occurred_at.utcoffset() is not None

    @CHANNELS
    def test_undelivered_maps_status_and_code(self, adapter, peer, channel):
        need(adapter.supports_lookup, "status lookup")
        sent = adapter.send(peer.message("undeliverable", channel_of(adapter, channel)), new_key())
        peer.settle()
        final = adapter.status(sent.provider_message_id)
        assert final.status is ObservedStatus.undelivered
        assert final.code == peer.undelivered_code(channel).value

    def test_lookups_of_unknown_messages_are_none(self, adapter):
        need(adapter.supports_lookup, "status lookup")
        assert adapter.status("no-such-message-" + uuid.uuid4().hex) is None
        if adapter.supports_lookup_by_key:
            assert adapter.find_by_key(new_key()) is None

    def test_valid_webhook_gives_observations_with_stable_dedupe_keys(self, adapter, peer):
        need(has_webhooks(peer), "webhooks")
        key, pmid = self._accepted(adapter, peer)
        request = peer.webhook(pmid, key, "delivered")
        first = adapter.verify_webhook(request)
        assert [o.status for o in first] == [ObservedStatus.delivered]
        observation = first[0]
        assert observation.provider == adapter.name
        assert observation.provider_message_id == pmid
        assert observation.dedupe_key
        replayed = adapter.verify_webhook(peer.webhook(pmid, key, "delivered"))
        assert [o.dedupe_key for o in replayed] == [observation.dedupe_key]
        other = adapter.verify_webhook(peer.webhook(pmid, key, "sent"))
        assert other[0].dedupe_key != observation.dedupe_key

    @pytest.mark.parametrize("signature", ["missing", "wrong_secret", "tampered"])
    def test_unsigned_or_badly_signed_webhook_is_refused(self, adapter, peer, signature):
        need(has_webhooks(peer), "webhooks")
        key, pmid = self._accepted(adapter, peer)
        with pytest.raises(InvalidSignature):
            adapter.verify_webhook(peer.webhook(pmid, key, "delivered", signature=signature))

    def test_our_reference_goes_out_and_a_receipt_naming_it_alone_settles_the_attempt(
        self, adapter, peer, tidings, clock
    ):
        """Invariant 3: the worker died after the provider took the call and
        before it recorded the provider's id; the receipt, echoing the
        reference we sent in the provider's own field, is all that is left."""
        need(has_webhooks(peer), "webhooks")
        channel = sorted(adapter.channels)[0]
        worker, claimed = _claimed_and_marked(tidings, adapter, channel)
        result = adapter.send(peer.message("accept", channel), claimed.attempt_key)
        assert isinstance(result, Accepted)
        assert peer.requests_recorded(claimed.attempt_key) == 1  # in the provider's field
        clock.advance(worker.config.lease_seconds + 1)  # the worker is gone: recovery
        worker.sweep_once()
        [attempt] = tidings.get(claimed.intent.id).attempts
        assert attempt.state == "unknown" and attempt.provider_message_id is None
        receipt = peer.webhook(result.provider_message_id, claimed.attempt_key, "delivered")
        [observation] = adapter.verify_webhook(receipt)
        assert observation.attempt_key == claimed.attempt_key
        with tidings.db.transaction() as conn:
            effect = apply_observation(conn, observation, "webhook", clock.now())
        assert effect == "intent_delivered"
        [attempt] = tidings.get(claimed.intent.id).attempts
        assert attempt.state == "delivered"
        assert attempt.provider_message_id == result.provider_message_id

    def test_adapter_without_webhooks_refuses_them(self, adapter, peer):
        if has_webhooks(peer):
            pytest.skip("the provider sends webhooks")
        request = WebhookRequest("POST", "https://tidings.test/hook", {}, b"{}")
        with pytest.raises(ProviderConfigError):
            adapter.verify_webhook(request)

    def test_unknown_raw_status_is_unknown_and_kept(self, adapter, peer):
        need(has_webhooks(peer), "webhooks")
        key, pmid = self._accepted(adapter, peer)
        [observation] = adapter.verify_webhook(peer.webhook(pmid, key, UNKNOWN_RAW_STATUS))
        assert observation.status is ObservedStatus.unknown
        assert observation.raw_status == UNKNOWN_RAW_STATUS
        assert UNKNOWN_RAW_STATUS in repr(observation.raw)

    def test_unknown_codes_map_to_unknown(self, adapter):
        status, code = adapter.map_status(UNKNOWN_RAW_STATUS, "E-NEVER-SEEN-42")
        assert (status, code) == (ObservedStatus.unknown, RejectCode.UNKNOWN.value)

    def test_raw_destination_never_kept_in_observations(self, adapter, peer):
        if not (has_webhooks(peer) or adapter.supports_lookup):
            pytest.skip("adapter has neither webhooks nor lookups: it makes no observations")
        channel = sorted(adapter.channels)[0]
        message = peer.message("accept", channel)
        key = new_key()
        pmid = adapter.send(message, key).provider_message_id
        observations = []
        if has_webhooks(peer):
            request = peer.webhook(pmid, key, "delivered", destination=message.to)
            observations += adapter.verify_webhook(request)
        if adapter.supports_lookup:
            observations.append(adapter.status(pmid))
        for observation in observations:
            assert isinstance(observation, Observation)
            assert message.to not in repr(observation.raw)

    def test_destination_and_body_stay_out_of_message_repr(self, adapter, peer):
        message = peer.message("accept", sorted(adapter.channels)[0])
        assert message.to not in repr(message)
        assert message.body not in repr(message)

    # --- helpers -------------------------------------------------------------

    @staticmethod
    def _accepted(adapter, peer) -> tuple[str, str]:
        key = new_key()
        result = adapter.send(peer.message("accept", sorted(adapter.channels)[0]), key)
        assert isinstance(result, Accepted)
        return key, result.provider_message_id

    @staticmethod
    def _never_went_out(adapter: ProviderAdapter, key: str) -> None:
        # "Certainly not processed" must hold at the provider, not just in our result.
        if adapter.supports_lookup_by_key:
            assert adapter.find_by_key(key) is None
