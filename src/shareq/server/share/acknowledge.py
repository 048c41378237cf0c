"""Applying the acknowledgements of a ShareFetch, ShareAcknowledge or TxnShareAcknowledge: wire
batches to engine ones, then per partition persist and commit, each with its Kafka error code."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from shareq.share import (
    AcknowledgementBatch,
    AcknowledgeType,
    InvalidRequest,
    ShareRequestError,
    parse_acknowledge_types,
)
from shareq.share.acknowledgement import SINGLE_TYPES
from shareq.share.session import TopicIdPartition

from .locate import locate, resolve

if TYPE_CHECKING:
    from .services import ShareServices


_RENEW = AcknowledgeType.RENEW
_RENEW_ONLY = (_RENEW,)
_TYPES = itemgetter(2)  # an AcknowledgementBatch's types
_tuple_new = tuple.__new__


def parse_batches(wire: Sequence[Any], *, renew: bool) -> tuple[AcknowledgementBatch, ...]:
    """Wire acknowledgement batches to engine ones; raises ``ShareRequestError`` (INVALID_REQUEST).

    Nearly every batch carries one type (clients split where the type changes): its types are
    a ready tuple found by one lookup, and the batch is built in one comprehension."""
    single = SINGLE_TYPES.get
    new = _tuple_new
    out = tuple(
        [
            new(
                AcknowledgementBatch,
                (
                    batch.first_offset,
                    batch.last_offset,
                    single(batch.acknowledge_types) or _several(batch.acknowledge_types, renew),
                ),
            )
            for batch in wire
        ]
    )
    if not renew and _RENEW_ONLY in map(_TYPES, out):
        raise InvalidRequest("RENEW needs is_renew_ack")
    return out


def _several(values: Sequence[int], renew: bool) -> tuple[AcknowledgeType, ...]:
    """A batch's types other than one known type: a type per record, or a peer fault."""
    types = parse_acknowledge_types(values)
    if not renew and _RENEW in types:
        raise InvalidRequest("RENEW needs is_renew_ack")
    return types


async def acknowledge_one(
    share: ShareServices,
    group_id: str,
    member_id: str,
    tip: TopicIdPartition,
    wire: Sequence[Any],
    *,
    renew: bool,
) -> ErrorCode:
    try:
        batches = parse_batches(wire, renew=renew)
    except ShareRequestError as error:
        return error.error_code
    sp, key, code = locate(share, group_id, tip)
    if sp is None:
        if key is None:
            return code
        sp, code = await resolve(share, group_id, tip)  # not loaded yet
        if sp is None:
            return code
    delays = release_delays(wire)
    return await share.partitions.acknowledge(sp, member_id, batches, release_delays=delays)


def release_delays(wire: Sequence[Any]) -> tuple[tuple[int, int, int], ...]:
    """``(first, last, delay ms)`` of the batches carrying shareq's release delay (ShareAcknowledge)."""
    return tuple(
        (int(b.first_offset), int(b.last_offset), int(b.release_delay_ms))
        for b in wire
        if getattr(b, "release_delay_ms", 0) > 0
    )


async def acknowledge_all(
    share: ShareServices,
    group_id: str,
    member_id: str,
    items: Sequence[tuple[TopicIdPartition, Sequence[Any]]],
    *,
    renew: bool = False,
) -> list[ErrorCode]:
    """Apply every partition's acknowledgements side by side; each answers after its durable write."""
    if len(items) == 1:
        tip, wire = items[0]
        return [await acknowledge_one(share, group_id, member_id, tip, wire, renew=renew)]
    return list(
        await asyncio.gather(
            *(acknowledge_one(share, group_id, member_id, tip, wire, renew=renew) for tip, wire in items)
        )
    )
