"""ListEvents, the app's event feed, through both clients against a real server.

The events come from dev.app, whose pushes the development server's in-process mock
APNs delivers. Other tests share that app, so each test first reads the feed to its
end and looks only at what comes after, and at its own activities' events.
"""

from __future__ import annotations

import asyncio
import time
from typing import List, Optional, Tuple

import pytest
from conftest import Dev
from harness import run, token, uid

import liverelay
from liverelay import pb

ATTRS = "EventAttributes"


def feed_end(client: liverelay.Client, app: str) -> int:
    """The cursor after the last event the feed holds now."""
    cursor = 0
    while True:
        page = client.list_events(app, after_cursor=cursor, max_events=1000)
        cursor = page.next_cursor
        if not page.more:
            return cursor


def events_after(client: liverelay.Client, app: str, cursor: int) -> List[pb.Event]:
    events: List[pb.Event] = []
    while True:
        page = client.list_events(app, after_cursor=cursor, max_events=1000)
        events.extend(page.events)
        cursor = page.next_cursor
        if not page.more:
            return events


def of(activity: str, events: List[pb.Event]) -> List[pb.Event]:
    return [e for e in events if e.activity_id == activity]


def start(client: liverelay.Client, app: str, activity: str, key: Optional[str] = None) -> pb.StartActivityReply:
    """Starts an activity through a new push-to-start token and waits for its delivery."""
    t = token()
    client.register_token(app_id=app, kind=pb.TOKEN_KIND_PUSH_TO_START, token=t, environment=pb.ENVIRONMENT_SANDBOX,
                          attributes_type=ATTRS)
    return client.start_activity(app_id=app, activity_id=activity, attributes_type=ATTRS, attributes_json={},
                                 content_state_json={"step": 1}, targets=pb.Targets(push_to_start_tokens=[t]),
                                 wait_for_delivery=True, idempotency_key=key)


def wait_for_events(client: liverelay.Client, app: str, cursor: int, activity: str, count: int) -> List[pb.Event]:
    """The activity's events after `cursor` once there are `count` of them (a call's settling
    is recorded as the call settles; bounded, so a missing event fails the test)."""
    deadline = time.monotonic() + 20
    while True:
        mine = of(activity, events_after(client, app, cursor))
        if len(mine) >= count or time.monotonic() > deadline:
            return mine
        time.sleep(0.05)


def test_a_started_then_ended_activity_leaves_settled_and_ended_events(dev: Dev) -> None:
    with dev.client() as client:
        base = feed_end(client, dev.app_id)
        activity, key = uid("act"), uid("key")
        started = start(client, dev.app_id, activity, key)
        assert (started.summary.delivered, started.summary.complete) == (1, True)
        [settled] = wait_for_events(client, dev.app_id, base, activity, 1)
        assert settled.kind == pb.EVENT_KIND_CALL_SETTLED
        assert settled.cursor > base
        assert (settled.call_timestamp, settled.idempotency_key) == (started.timestamp, key)
        assert settled.time_ms > 1_600_000_000_000
        assert settled.HasField("account")
        assert (settled.account.targeted, settled.account.delivered, settled.account.complete) == (1, 1, True)
        assert settled.account.queued == 0

        ended = client.end_activity(app_id=dev.app_id, activity_id=activity, content_state_json={"step": 2})
        assert ended.state == pb.ACTIVITY_STATE_ENDED
        mine = wait_for_events(client, dev.app_id, base, activity, 2)
        assert [e.kind for e in mine][:2] == [pb.EVENT_KIND_CALL_SETTLED, pb.EVENT_KIND_ACTIVITY_ENDED]
        finished = mine[1]
        assert finished.activity_state == pb.ACTIVITY_STATE_ENDED
        assert finished.cursor > settled.cursor
        assert not finished.HasField("account") and finished.token == ""


def test_pages_of_one_event_say_more(dev: Dev) -> None:
    with dev.client() as client:
        base = feed_end(client, dev.app_id)
        activity = uid("act")
        start(client, dev.app_id, activity)
        wait_for_events(client, dev.app_id, base, activity, 1)  # the start's settling, recorded after its reply
        client.end_activity(app_id=dev.app_id, activity_id=activity)
        assert len(wait_for_events(client, dev.app_id, base, activity, 2)) >= 2

        pages: List[Tuple[List[int], bool]] = []
        seen: List[pb.Event] = []
        cursor = base
        while True:
            page = client.list_events(dev.app_id, after_cursor=cursor, max_events=1)
            pages.append(([e.cursor for e in page.events], page.more))
            seen.extend(page.events)
            assert len(page.events) == 1, pages
            assert page.next_cursor == page.events[0].cursor
            cursor = page.next_cursor
            if not page.more:
                break
            assert len(pages) < 1000, "the feed never ended"
        assert len(pages) >= 2
        assert all(more for _, more in pages[:-1])
        cursors = [e.cursor for e in seen]
        assert cursors == sorted(set(cursors)) and cursors[0] > base
        assert [e.kind for e in of(activity, seen)][:2] == [pb.EVENT_KIND_CALL_SETTLED, pb.EVENT_KIND_ACTIVITY_ENDED]


def test_a_waiting_poll_returns_the_event_that_comes(dev: Dev) -> None:
    async def main() -> None:
        async with dev.server.async_client(dev.api_key) as client:
            base = await async_feed_end(client, dev.app_id)
            poll = asyncio.ensure_future(client.list_events(dev.app_id, after_cursor=base, wait_ms=10_000))
            await asyncio.sleep(0.3)  # the poll is (most likely) waiting on the server now
            activity = uid("act")
            t = token()
            await client.register_token(app_id=dev.app_id, kind=pb.TOKEN_KIND_PUSH_TO_START, token=t,
                                        environment=pb.ENVIRONMENT_SANDBOX, attributes_type=ATTRS)
            started = await client.start_activity(app_id=dev.app_id, activity_id=activity, attributes_type=ATTRS,
                                                  attributes_json={}, content_state_json={},
                                                  targets=pb.Targets(push_to_start_tokens=[t]), wait_for_delivery=True)
            reply = await poll
            assert reply.events, "the poll returned without the event"
            assert reply.next_cursor == reply.events[-1].cursor > base
            event = reply.events[0]
            assert (event.kind, event.activity_id) == (pb.EVENT_KIND_CALL_SETTLED, activity)
            assert event.call_timestamp == started.timestamp
            assert event.account.delivered == 1

    run(main())


async def async_feed_end(client: liverelay.AsyncClient, app: str) -> int:
    cursor = 0
    while True:
        page = await client.list_events(app, after_cursor=cursor, max_events=1000)
        cursor = page.next_cursor
        if not page.more:
            return cursor


def test_a_poll_with_nothing_to_read_returns_empty_after_its_wait(dev: Dev) -> None:
    with dev.client() as client:
        base = feed_end(client, dev.app_id)
        reply = client.list_events(dev.app_id, after_cursor=base, wait_ms=200)
        assert list(reply.events) == []
        assert (reply.next_cursor, reply.more) == (base, False)
        # Without a wait it answers at once, the same way.
        reply = client.list_events(dev.app_id, after_cursor=base)
        assert (list(reply.events), reply.next_cursor, reply.more) == ([], base, False)


def test_the_default_deadline_covers_the_wait(dev: Dev) -> None:
    """No timeout given: the deadline is the default timeout plus the wait, so a poll still
    waiting when the default timeout has passed gets the event that comes after it."""

    async def main() -> None:
        async with dev.server.async_client(dev.api_key, default_timeout=1.0) as client:
            base = await async_feed_end(client, dev.app_id)
            poll = asyncio.ensure_future(client.list_events(dev.app_id, after_cursor=base, wait_ms=10_000))
            await asyncio.sleep(1.5)  # past the default timeout, well within default + wait
            activity = uid("act")
            t = token()
            await client.register_token(app_id=dev.app_id, kind=pb.TOKEN_KIND_PUSH_TO_START, token=t,
                                        environment=pb.ENVIRONMENT_SANDBOX, attributes_type=ATTRS)
            await client.start_activity(app_id=dev.app_id, activity_id=activity, attributes_type=ATTRS,
                                        attributes_json={}, content_state_json={},
                                        targets=pb.Targets(push_to_start_tokens=[t]), wait_for_delivery=True)
            reply = await poll
            assert [e.activity_id for e in reply.events][:1] == [activity]

    run(main())


def test_an_app_the_key_may_not_act_for_is_permission_denied(dev: Dev) -> None:
    other = uid("events.other")
    with dev.admin() as admin:
        admin.create_app(app_id=other, bundle_id=f"com.example.{other.replace('.', '-')}")
    with dev.client() as client:
        with pytest.raises(liverelay.PermissionDeniedError):
            client.list_events(other)


def test_out_of_range_requests_name_their_field(dev: Dev) -> None:
    with dev.client() as client:
        with pytest.raises(liverelay.InvalidArgumentError) as too_many:
            client.list_events(dev.app_id, max_events=1001)
        assert "max_events" in too_many.value.violations
        with pytest.raises(liverelay.InvalidArgumentError) as too_long:
            client.list_events(dev.app_id, wait_ms=60_001)
        assert "wait_ms" in too_long.value.violations


def test_async_tail_yields_new_events_in_cursor_order(dev: Dev) -> None:
    async def main() -> None:
        async with dev.server.async_client(dev.api_key) as client:
            base = await async_feed_end(client, dev.app_id)
            activity = uid("act")
            collected: List[pb.Event] = []

            async def tail() -> None:
                async for event in client.tail_events(dev.app_id, after_cursor=base, wait_ms=10_000):
                    collected.append(event)
                    if [e.kind for e in of(activity, collected)] == [pb.EVENT_KIND_CALL_SETTLED,
                                                                     pb.EVENT_KIND_ACTIVITY_ENDED]:
                        return

            tailing = asyncio.ensure_future(tail())
            await asyncio.sleep(0.3)
            t = token()
            await client.register_token(app_id=dev.app_id, kind=pb.TOKEN_KIND_PUSH_TO_START, token=t,
                                        environment=pb.ENVIRONMENT_SANDBOX, attributes_type=ATTRS)
            await client.start_activity(app_id=dev.app_id, activity_id=activity, attributes_type=ATTRS,
                                        attributes_json={}, content_state_json={},
                                        targets=pb.Targets(push_to_start_tokens=[t]), wait_for_delivery=True)

            # The start's settling is recorded after its reply: the end waits for the tail to see it.
            async def settled() -> None:
                while not of(activity, collected):
                    await asyncio.sleep(0.01)

            await asyncio.wait_for(settled(), 20)
            await client.end_activity(app_id=dev.app_id, activity_id=activity)
            await asyncio.wait_for(tailing, 30)
            cursors = [e.cursor for e in collected]
            assert cursors == sorted(set(cursors)) and cursors[0] > base
            ended = of(activity, collected)[-1]
            assert ended.activity_state == pb.ACTIVITY_STATE_ENDED

    run(main())


def test_sync_tail_yields_events_in_cursor_order(dev: Dev) -> None:
    with dev.client() as client:
        base = feed_end(client, dev.app_id)
        activities = [uid("act"), uid("act")]
        for activity in activities:
            start(client, dev.app_id, activity)
            # The start's settling is recorded as the call settles, after its reply: wait for it,
            # so that the end's event follows it in the feed.
            wait_for_events(client, dev.app_id, base, activity, 1)
            client.end_activity(app_id=dev.app_id, activity_id=activity)
        expected = [e.cursor for e in wait_for_events(client, dev.app_id, base, activities[1], 2)]
        collected: List[pb.Event] = []
        # Pages of one event: the tail follows next_cursor from page to page.
        for event in client.tail_events(dev.app_id, after_cursor=base, wait_ms=5000, max_events=1):
            collected.append(event)
            if event.cursor >= expected[-1]:
                break
        cursors = [e.cursor for e in collected]
        assert cursors == sorted(set(cursors)) and cursors[0] > base
        assert cursors == [e.cursor for e in events_after(client, dev.app_id, base)][: len(cursors)]
        for activity in activities:
            assert [e.kind for e in of(activity, collected)][:2] == [pb.EVENT_KIND_CALL_SETTLED,
                                                                     pb.EVENT_KIND_ACTIVITY_ENDED]
