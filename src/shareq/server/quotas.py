"""Client quotas in the asyncio shell: Produce and Fetch ask here for their throttle time.

The measuring is ``shareq.quota`` (no I/O); this module supplies the clock, the connection's
client id and user, and the wait. The user is the connection's principal name: the SASL user,
the client certificate's DN on an SSL listener, else ``ANONYMOUS``.

Enforced: ``producer_byte_rate`` (the record bytes of each Produce request; Kafka counts the
whole request, a few dozen bytes more) and ``consumer_byte_rate`` (the record bytes of each Fetch
response). Stored and described but not enforced: ``request_percentage``,
``controller_mutation_rate`` and ``connection_creation_rate``.

As Kafka does (KIP-219), a request over its quota is answered at once with the throttle time,
and the connection is muted for that long: shareq holds that connection's next Produce or Fetch
until then (Kafka stops reading the channel, so any request waits). A throttled Fetch returns no
records and its bytes are not counted, as in Kafka; the consumer fetches them again afterwards.
A Fetch reads at most what one quota window holds, so a large fetch cannot be throttled for ever.
"""

from __future__ import annotations

import asyncio

from shareq.quota import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE

from .clock import now_ms
from .context import RequestContext

_MAX_THROTTLE_MS = 2**31 - 1  # throttle_time_ms is an int32; Kafka casts its long to int


def muted_for_s(ctx: RequestContext) -> float:
    """Seconds this connection stays muted after an earlier throttled answer (0: not muted)."""
    if ctx.broker.quotas.idle:
        return 0.0
    return ctx.broker.quotas.muted_for(ctx.connection_id, now_ms()) / 1000.0


def fetch_max_bytes(ctx: RequestContext, requested: int) -> int:
    """A Fetch's byte budget: what it asked for, capped by the broker's ``fetch.max.bytes`` and by
    what its consumer_byte_rate lets one quota window hold (as Kafka caps it), so a large fetch is
    not throttled for ever."""
    requested = min(requested, ctx.broker.config["fetch.max.bytes"])
    if ctx.broker.quotas.idle:
        return requested
    cap = ctx.broker.quotas.max_value_in_window(CONSUMER_BYTE_RATE, ctx.user, ctx.header.client_id or "")
    return requested if cap is None else min(requested, int(cap))


def produce_throttle_ms(ctx: RequestContext, record_bytes: int) -> int:
    """Count a Produce request's bytes; the throttle time to answer with (and mute for)."""
    return _record(ctx, PRODUCER_BYTE_RATE, record_bytes, take_back=False)


async def fetch_throttle_ms(ctx: RequestContext, record_bytes: int) -> int:
    """The Fetch hook: wait out an earlier mute of this connection, then count the response's
    bytes. A non-zero answer means: reply with this throttle time and no records."""
    if ctx.broker.quotas.idle:
        return 0
    wait_s = muted_for_s(ctx)
    if wait_s > 0:
        await asyncio.sleep(wait_s)
    return _record(ctx, CONSUMER_BYTE_RATE, record_bytes, take_back=True)


async def share_fetch_throttle_ms(ctx: RequestContext, record_bytes: int) -> int:
    """The ShareFetch hook: count the bytes it hands out against consumer_byte_rate (as Kafka).
    Unlike a throttled Fetch, the records still go out: they are acquired, and holding them back
    would only spend a delivery attempt; the client waits out the throttle time before its next
    fetch, and this connection is muted as long."""
    if ctx.broker.quotas.idle:
        return 0
    return _record(ctx, CONSUMER_BYTE_RATE, record_bytes, take_back=False)


async def wait_out_mute(ctx: RequestContext) -> None:
    """Hold a request of a connection still muted by an earlier throttled answer."""
    wait_s = muted_for_s(ctx)
    if wait_s > 0:
        await asyncio.sleep(wait_s)


def _record(ctx: RequestContext, key: str, value: int, *, take_back: bool) -> int:
    usage = ctx.broker.quotas
    if usage.idle:
        return 0
    client_id = ctx.header.client_id or ""
    now = now_ms()
    throttle = min(usage.record(key, ctx.user, client_id, value, now), _MAX_THROTTLE_MS)
    if throttle > 0:
        if take_back:
            usage.unrecord(key, ctx.user, client_id, value, now)
        usage.mute(ctx.connection_id, now, throttle)
    return throttle
