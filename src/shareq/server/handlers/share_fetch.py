"""ShareFetch v1-v2: session epochs, piggybacked acknowledgements, acquisition, long polls.

Order of one request: the share session (``ShareSessionCache``, per group and member), then the
acknowledgements riding along (each persisted before it commits; outcome in
``acknowledge_error_code``), then acquisition across the session's partitions within
``max_records`` / ``max_bytes``. With nothing acquirable the fetch parks on one future, registered
with every partition log it reads (woken by produce) and every share-partition (woken when records
are released or locks expire), until ``max_wait``. Epoch -1 closes the session and releases the
member's records.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.protocol import VersionRange
from shareq.protocol.api_keys import SHARE_FETCH
from shareq.share import AcquireMode
from shareq.share.persister import SharePartitionKey
from shareq.share.session import SessionAction, ShareSessionError, TopicIdPartition

from ..context import RequestContext
from ..errors import session_error_code
from ..partitions import wait_for_data
from ..quotas import fetch_max_bytes, share_fetch_throttle_ms, wait_out_mute
from ..share import ShareServices
from ..share.acknowledge import acknowledge_all
from ..share.locate import locate, resolve
from ..share.manager import NOTHING, Acquired
from .share_response import FetchedPartition, ShareReply, error_response, share_reply

_rotation = itertools.count()


async def handle_share_fetch(request: Any, ctx: RequestContext) -> Any:
    share = ctx.broker.share
    assert share is not None
    group_id: str = request.group_id
    member_id: str = request.member_id or ""
    epoch: int = request.share_session_epoch
    listed: list[TopicIdPartition] = []
    acks: list[tuple[TopicIdPartition, Any]] = []
    for topic in request.topics:
        for p in topic.partitions:
            tip = TopicIdPartition(topic_id=topic.topic_id, partition=p.partition_index)
            listed.append(tip)
            if p.acknowledgement_batches:
                acks.append((tip, p.acknowledgement_batches))
    forgotten = [
        TopicIdPartition(topic_id=f.topic_id, partition=p)
        for f in request.forgotten_topics_data
        for p in f.partitions
    ]
    await wait_out_mute(ctx)  # client quotas: an earlier throttled answer mutes the connection
    # Like Kafka, a session is opened for any member id: membership is the heartbeat's business
    # (authorization is READ on the group and the topics). A member the group does not know holds
    # what it acquires until its locks lapse or its connection closes, which ends its session.
    now = share.now_ms()
    try:
        update = share.sessions.fetch(
            group_id,
            member_id,
            epoch,
            now_ms=now,
            # A partition listed only to carry acknowledgements and also forgotten leaves the
            # session (Kafka applies the forgotten list after the additions).
            topics=[tip for tip in listed if tip not in forgotten] if forgotten else listed,
            forgotten=forgotten,
            has_acknowledgements=bool(acks),
            connection_id=str(ctx.connection_id),
        )
    except ShareSessionError as error:
        return error_response(ctx, session_error_code(error), error.message)
    if update.released:
        share.session_closed(group_id, member_id, update.released)
    # The acknowledgements' durable write runs while the next records are acquired (they touch
    # other records: acknowledged ones stay ACQUIRED by this member until their write commits);
    # the response waits for it, so an acknowledgement still takes effect only once durable.
    writing = asyncio.ensure_future(acknowledge_all(share, group_id, member_id, acks)) if acks else None
    results: dict[TopicIdPartition, tuple[ErrorCode, Acquired | None]] = {}
    try:
        if update.action is SessionAction.CLOSED:
            if writing is not None:
                await asyncio.shield(writing)
            released = share.session_closed(group_id, member_id, update.partitions)
            if released:
                await asyncio.gather(*released)
        else:
            if writing is not None and share.key_ordered(group_id):
                # A key-ordered group acquires once its acknowledgements are durable: until then the
                # records they acknowledge hold their keys, so acquiring beside the write would look
                # past every later record of those keys and hand out the rest as scattered ranges.
                # The response waits for the write in any case.
                await asyncio.shield(writing)
            partitions = sorted(update.partitions)
            results = await _acquire(share, ctx, request, member_id, partitions, writing)
        await _counted(results)
    finally:
        codes = await writing if writing is not None else []
    ack_codes = {tip: code for (tip, _), code in zip(acks, codes, strict=True)}
    handed_out = sum(len(a.records) for _, a in results.values() if a is not None)
    throttle_ms = await share_fetch_throttle_ms(ctx, handed_out)
    return _response(share, ctx, group_id, results, ack_codes, throttle_ms)


async def _counted(results: dict[TopicIdPartition, tuple[ErrorCode, Acquired | None]]) -> None:
    """Wait for the acquisitions' delivery counts to be durable (crash-durable counts); records
    whose write failed are not handed out (their locks lapse and they come back)."""
    pending = [(tip, a) for tip, (_, a) in results.items() if a is not None and a.counted is not None]
    if not pending:
        return
    codes = await asyncio.gather(*(asyncio.shield(a.counted) for _, a in pending if a.counted is not None))
    for (tip, _), code in zip(pending, codes, strict=True):
        if code != ErrorCode.none:
            results[tip] = (ErrorCode.none, NOTHING)


async def _acquire(
    share: ShareServices,
    ctx: RequestContext,
    request: Any,
    member_id: str,
    partitions: list[TopicIdPartition],
    writing: asyncio.Future[list[ErrorCode]] | None,
) -> dict[TopicIdPartition, tuple[ErrorCode, Acquired | None]]:
    """Acquire within the request's limits, parking until ``max_wait`` while nothing is acquirable.

    While the request's own acknowledgements are being written nothing parks: if the window is
    full the write's commit is what frees it, so the fetch waits for the write and tries again."""
    group_id = request.group_id
    results, live, loading = _cached(share, group_id, partitions)
    if loading:
        live = await _ready(results, live, loading)
    if not live:
        return results
    if len(live) > 1:  # rotate so a small max_records does not always favour the first partition
        shift = next(_rotation) % len(live)
        live = live[shift:] + live[:shift]
    manager = share.partitions
    mode = (
        AcquireMode.RECORD_LIMIT
        if getattr(request, "share_acquire_mode", 0) == 1
        else AcquireMode.BATCH_OPTIMIZED
    )
    batch_size = request.batch_size if request.batch_size > 0 else request.max_records
    deadline = share.now_ms() + request.max_wait.total_seconds() * 1000.0  # the engine's clock
    io = ctx.broker.io.api(SHARE_FETCH)
    while True:
        now = share.now_ms()
        records_left = request.max_records if request.max_records > 0 else 500
        # 0 asks for no records, as Kafka answers it; a consumer quota caps it at one quota window
        bytes_left = fetch_max_bytes(ctx, request.max_bytes)
        got = False
        for tip, sp in live:
            if records_left <= 0 or bytes_left <= 0:
                break
            acquired = manager.acquire(
                sp,
                member_id,
                max_records=records_left,
                batch_size=batch_size,
                mode=mode,
                max_bytes=bytes_left,
                now=now,
            )
            io.bytes_read += acquired.bytes_read
            if acquired.count:
                got = True
                io.records_delivered += acquired.count
                io.bytes_delivered += len(acquired.records)
                records_left -= acquired.count
                bytes_left -= len(acquired.records)
                results[tip] = (ErrorCode.none, acquired)
        remaining = (deadline - share.now_ms()) / 1000.0
        if got or remaining <= 0 or ctx.broker.stopping:
            return results
        if writing is not None and not writing.done():
            await asyncio.shield(writing)
            continue
        await _park(share, [sp.key for _, sp in live], remaining)
        if share.sessions.get(group_id, member_id) is None:
            return results  # the session closed while parked (member left or expired)


def _cached(
    share: ShareServices, group_id: str, partitions: list[TopicIdPartition]
) -> tuple[
    dict[TopicIdPartition, tuple[ErrorCode, Acquired | None]],
    list[tuple[TopicIdPartition, Any]],
    list[tuple[TopicIdPartition, asyncio.Future[tuple[Any, ErrorCode]]]],
]:
    """The errors to report, the share-partitions ready to acquire from and those now loading."""
    results: dict[TopicIdPartition, tuple[ErrorCode, Acquired | None]] = {}
    live: list[tuple[TopicIdPartition, Any]] = []
    loading: list[tuple[TopicIdPartition, asyncio.Future[tuple[Any, ErrorCode]]]] = []
    for tip in partitions:
        sp, key, code = locate(share, group_id, tip)
        if sp is not None:
            live.append((tip, sp))
        elif key is None:
            results[tip] = (code, None)
        else:
            loading.append((tip, asyncio.ensure_future(resolve(share, group_id, tip))))
    return results, live, loading


async def _ready(
    results: dict[TopicIdPartition, tuple[ErrorCode, Acquired | None]],
    live: list[tuple[TopicIdPartition, Any]],
    loading: list[tuple[TopicIdPartition, asyncio.Future[tuple[Any, ErrorCode]]]],
) -> list[tuple[TopicIdPartition, Any]]:
    """The share-partitions this fetch acquires from, some of them still loading.

    As in Kafka, a share-partition serves fetches once its state is loaded, and a fetch does not wait
    for the loading of others: those not yet loaded start loading and join a later fetch. Only when
    none is ready does the fetch wait, for the first in request order (so a consumer's first poll
    on several new share-partitions returns one partition's records, as Kafka 4.4's does).
    """
    if not live:
        tip, first = loading.pop(0)
        sp, code = await asyncio.shield(first)
        if sp is None:
            results[tip] = (code, None)
        else:
            live.append((tip, sp))
    for _, other in loading:  # they finish on their own; a failure is reported by a later fetch
        other.add_done_callback(_retrieved)
    return live


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


async def _park(share: ShareServices, keys: list[SharePartitionKey], timeout_s: float) -> None:
    """Wait until a produce, a release or an expiry touches one of ``keys``, or the timeout."""
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    logs = [p for key in keys if (p := share.log_partition(key.topic_id, key.partition)) is not None]
    share.partitions.park(keys, waiter)
    try:
        await wait_for_data(logs, timeout_s, waiter)
    finally:
        share.partitions.unpark(keys, waiter)


def _response(
    share: ShareServices,
    ctx: RequestContext,
    group_id: str,
    results: dict[TopicIdPartition, tuple[ErrorCode, Acquired | None]],
    ack_codes: dict[TopicIdPartition, ErrorCode],
    throttle_ms: int,
) -> ShareReply:
    topics: list[tuple[Any, list[Any]]] = []
    parts: list[Any] = []
    topic_id = None
    for tip in sorted(results.keys() | ack_codes.keys()) if ack_codes else sorted(results):
        code, acquired = results.get(tip, _NOTHING)
        if tip.topic_id != topic_id or not topics:
            topic_id = tip.topic_id
            parts = []
            topics.append((topic_id, parts))
        parts.append(
            FetchedPartition(
                tip.partition,
                code,
                ack_codes.get(tip, ErrorCode.none),
                acquired.records if acquired is not None else b"",
                acquired.ranges if acquired is not None else (),
            )
        )
    return share_reply(ctx, share, group_id, SHARE_FETCH, topics, throttle_ms)


_NOTHING: tuple[ErrorCode, Acquired | None] = (ErrorCode.none, None)


HANDLERS = {SHARE_FETCH: (VersionRange(1, 2), handle_share_fetch)}
