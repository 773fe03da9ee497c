"""Twilio's Messages list as the lookup for a call whose answer was lost.

Against the fake that answers with the shapes of Twilio's OpenAPI (and
refuses query parameters ListMessage does not have), and against Prism
serving that description, which validates the request itself.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tests.providers.twilio_peer import (
    ACCOUNT,
    CALLBACK,
    SERVICE,
    TOKEN,
    TwilioFake,
    make_adapter,
)
from tidings.providers.errors import ProviderUnavailable
from tidings.providers.messages import OutboundMessage
from tidings.providers.outcomes import Accepted, ObservedStatus
from tidings.providers.twilio import SEARCH_PAGE_SIZE, SEARCH_PAGES, TwilioAdapter

NUMBER = "+15550001234"
SINCE = datetime(2019, 6, 1, tzinfo=UTC)  # after every message of the example page


@pytest.fixture
def fake(spec: dict[str, Any]) -> TwilioFake:
    return TwilioFake(spec)


def sms(to: str) -> OutboundMessage:
    return OutboundMessage("sms", to, "hello")


def test_a_message_whose_answer_was_lost_is_listed_by_its_number(fake: TwilioFake) -> None:
    adapter = make_adapter(fake)
    fake.outcomes[NUMBER] = "timeout"
    since = fake.clock - timedelta(seconds=5)
    lost = adapter.send(sms(NUMBER), "tdg:lost:1")
    assert not isinstance(lost, Accepted)  # the answer never came
    adapter.send(sms("+15550009876"), "tdg:other:1")  # another number: not listed
    [found] = adapter.search("sms", NUMBER, since, fake.clock + timedelta(seconds=5))
    [sid] = [m["sid"] for m in fake.messages.values() if m["to"] == NUMBER]
    assert found.provider_message_id == sid
    assert found.created_at == fake.clock and found.status is ObservedStatus.accepted
    assert found.attempt_key is None  # Twilio's list cannot name our reference
    query = parse_qs(urlsplit(str(fake.requests[-1].url)).query)
    assert query == {"To": [NUMBER], "PageSize": [str(SEARCH_PAGE_SIZE)]}  # no DateSent


def test_the_search_keeps_only_messages_taken_in_the_window(fake: TwilioFake) -> None:
    adapter = make_adapter(fake)
    adapter.send(sms(NUMBER), "tdg:old:1")
    fake.clock += timedelta(minutes=10)
    adapter.send(sms(NUMBER), "tdg:new:1")
    since = fake.clock - timedelta(seconds=5)
    found = adapter.search("sms", NUMBER, since, fake.clock + timedelta(seconds=5))
    assert len(found) == 1 and found[0].created_at == fake.clock


def test_the_search_pages_until_a_page_is_older_than_the_window(fake: TwilioFake) -> None:
    adapter = make_adapter(fake)
    for n in range(SEARCH_PAGE_SIZE + 30):
        adapter.send(sms(NUMBER), f"tdg:many:{n}")
    since = fake.clock - timedelta(seconds=5)
    found = adapter.search("sms", NUMBER, since, fake.clock + timedelta(seconds=5))
    assert len(found) == SEARCH_PAGE_SIZE + 30
    pages = [r for r in fake.requests if r.method == "GET"]
    assert len(pages) == 2 and "Page=1" in str(pages[1].url)


def test_a_number_with_more_messages_than_the_search_reads_proves_nothing(
    fake: TwilioFake,
) -> None:
    adapter = make_adapter(fake)
    for n in range(SEARCH_PAGE_SIZE * SEARCH_PAGES + 1):
        adapter.send(sms(NUMBER), f"tdg:flood:{n}")
    since = fake.clock - timedelta(seconds=5)
    with pytest.raises(ProviderUnavailable):
        adapter.search("sms", NUMBER, since, fake.clock + timedelta(seconds=5))


def test_prism_accepts_our_list_search(prism_url: str) -> None:
    with TwilioAdapter(
        ACCOUNT, TOKEN, messaging_service_sid=SERVICE, status_callback=CALLBACK, base_url=prism_url
    ) as adapter:
        # Prism answers only a request the description accepts (else 422,
        # which the search raises as unavailable), with its example page:
        # messages of May 2019, read through the adapter's own parsing.
        page = adapter.parse_search(
            adapter._lookup(adapter.build_search_request("sms", NUMBER, SINCE, SINCE))
        )
        assert page and all(m.provider_message_id and m.created_at for m in page)
        # Prism's example page always names a next page, so a search that
        # reads to the end of the list (a queued message may sort late)
        # meets its page bound: unknown, never a proven absence. Each of
        # those pages' requests was one the description accepts.
        with pytest.raises(ProviderUnavailable, match="past 5 pages"):
            adapter.search("sms", NUMBER, SINCE, SINCE + timedelta(days=1))


def test_prism_refuses_a_list_search_the_description_does_not_allow(prism_url: str) -> None:
    response = httpx.get(
        f"{prism_url}/2010-04-01/Accounts/{ACCOUNT}/Messages.json",
        params={"To": NUMBER, "PageSize": "5000"},  # past ListMessage's maximum of 1000
        auth=(ACCOUNT, TOKEN),
    )
    assert response.status_code == 422


def _listed(sid: str, created: datetime, sent: datetime | None) -> dict[str, Any]:
    stamp = "%a, %d %b %Y %H:%M:%S +0000"
    return {
        "sid": sid,
        "status": "queued" if sent is None else "delivered",
        "error_code": None,
        "to": NUMBER,
        "date_created": created.strftime(stamp),
        "date_updated": (sent or created).strftime(stamp),
        "date_sent": None if sent is None else sent.strftime(stamp),
    }


def test_a_queued_message_sorted_after_older_ones_is_still_found() -> None:
    # Twilio orders the list by date sent; a message still queued has none,
    # so it may sort after a page wholly older than the call (issue 37).
    old = SINCE - timedelta(days=1)
    pages = {
        "0": [_listed(f"SM{n:032d}", old, old) for n in range(2)],
        "1": [_listed("SM" + "f" * 32, SINCE + timedelta(seconds=1), None)],
    }

    def answer(request: httpx.Request) -> httpx.Response:
        page = parse_qs(urlsplit(str(request.url)).query).get("Page", ["0"])[0]
        following = (
            None if page == "1" else f"/2010-04-01/Accounts/{ACCOUNT}/Messages.json?To=x&Page=1"
        )
        return httpx.Response(200, json={"messages": pages[page], "next_page_uri": following})

    client = httpx.Client(transport=httpx.MockTransport(answer), base_url="https://api.twilio.com")
    adapter = TwilioAdapter(ACCOUNT, TOKEN, messaging_service_sid=SERVICE, client=client)
    [found] = adapter.search("sms", NUMBER, SINCE, SINCE + timedelta(minutes=1))
    assert found.provider_message_id == "SM" + "f" * 32
