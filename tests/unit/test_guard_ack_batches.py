"""The length guard's fast walk of AcknowledgementBatches decides exactly as the generic walk.

ShareFetch and ShareAcknowledge requests may carry hundreds of acknowledgement batches (clients
split where the type changes), so the guard steps over the usual batch in one loop. kio stays the
reference: requests kio encodes, then cut short, stretched with tagged fields, or with bytes
overwritten, must get from ``check_body`` the same verdict (end position, rewritten payload, or
``MalformedRequestError``) as from the generic walk without fast paths, and kio must decode what
passes to the same request.
"""

from __future__ import annotations

import datetime
import io
import uuid
from types import ModuleType
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.share_acknowledge.v1 import request as ack_v1
from kio.schema.share_acknowledge.v2 import request as ack_v2
from kio.schema.share_fetch.v1 import request as fetch_v1
from kio.schema.share_fetch.v2 import request as fetch_v2
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i32, i64

from shareq.protocol import guard
from shareq.protocol.errors import MalformedRequestError
from shareq.protocol.guard import Edits, check_body, entity_check, reference_check
from shareq.protocol.schema.share_acknowledge.v1 import request as shareq_ack_v1
from shareq.protocol.schema.share_acknowledge.v2 import request as shareq_ack_v2

MODULES: list[tuple[ModuleType, str]] = [
    (ack_v1, "ShareAcknowledgeRequest"),
    (ack_v2, "ShareAcknowledgeRequest"),
    (fetch_v1, "ShareFetchRequest"),
    (fetch_v2, "ShareFetchRequest"),
    (shareq_ack_v1, "ShareAcknowledgeRequest"),  # with shareq's tagged release delay per batch
    (shareq_ack_v2, "ShareAcknowledgeRequest"),
]

offsets = st.integers(min_value=-(2**63), max_value=2**63 - 1)
types = st.lists(st.integers(min_value=-128, max_value=127), min_size=0, max_size=140)
batch_values = st.tuples(offsets, offsets, types)
partitions = st.lists(
    st.tuples(st.integers(min_value=0, max_value=2**31 - 1), st.lists(batch_values, max_size=150)),
    max_size=3,
)
topics = st.lists(partitions, max_size=2)


def request(
    module: ModuleType, name: str, spec: list[list[tuple[int, list[tuple[int, int, list[int]]]]]]
) -> Any:
    fetch = name == "ShareFetchRequest"
    batch_cls = module.AcknowledgementBatch
    delayed = "release_delay_ms" in batch_cls.__dataclass_fields__  # shareq's: some batches carry it
    part_cls = module.FetchPartition if fetch else module.AcknowledgePartition
    topic_cls = module.FetchTopic if fetch else module.AcknowledgeTopic
    topic_list = tuple(
        topic_cls(
            topic_id=uuid.UUID(int=t + 1),
            partitions=tuple(
                part_cls(
                    partition_index=i32(index),
                    acknowledgement_batches=tuple(
                        batch_cls(
                            first_offset=i64(first),
                            last_offset=i64(last),
                            acknowledge_types=tuple(i8(v) for v in kinds),
                            **({"release_delay_ms": i64(len(kinds))} if delayed and first % 3 == 0 else {}),
                        )
                        for first, last, kinds in batches
                    ),
                )
                for index, batches in parts
            ),
        )
        for t, parts in enumerate(spec)
    )
    cls = getattr(module, name)
    if fetch:
        return cls(
            group_id="g",
            member_id="m",
            share_session_epoch=i32(1),
            max_wait=datetime.timedelta(milliseconds=500),
            min_bytes=i32(1),
            max_records=i32(500),
            batch_size=i32(500),
            topics=topic_list,
            forgotten_topics_data=(),
        )
    return cls(group_id="g", member_id="m", share_session_epoch=i32(1), topics=topic_list)


def encode(entity: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


def verdict(check: Any, buf: bytes) -> tuple[str, Any]:
    edits: Edits = []
    try:
        end = check(buf, 0, len(buf), edits)
    except MalformedRequestError:
        return ("malformed", None)
    return ("ok", (end, edits))


def same_verdict(cls: type[Any], buf: bytes) -> tuple[str, Any]:
    fast = verdict(entity_check(cls), buf)
    reference = verdict(reference_check(cls), buf)
    assert fast == reference
    return fast


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    which=st.integers(min_value=0, max_value=len(MODULES) - 1),
    spec=topics,
    cut=st.integers(min_value=0, max_value=2**16),
    writes=st.lists(st.tuples(st.integers(min_value=0, max_value=2**16), st.integers(0, 255)), max_size=4),
)
def test_fast_walk_matches_the_generic_walk(
    which: int, spec: Any, cut: int, writes: list[tuple[int, int]]
) -> None:
    module, name = MODULES[which]
    entity = request(module, name, spec)
    cls = type(entity)
    buf = encode(entity)
    state, result = same_verdict(cls, buf)
    assert state == "ok" and result == (len(buf), [])
    assert check_body(cls, buf, 0) is buf
    assert entity_reader(cls)(buf, 0)[0] == entity
    same_verdict(cls, buf[: cut % (len(buf) + 1)])  # cut short anywhere
    mutated = bytearray(buf)
    for position, value in writes:
        mutated[position % len(mutated)] = value
    same_verdict(cls, bytes(mutated))


def test_unknown_tagged_fields_in_a_batch_are_cut_out_as_before() -> None:
    entity = request(ack_v2, "ShareAcknowledgeRequest", [[(0, [(5, 9, [1]), (10, 10, [3])])]])
    buf = encode(entity)
    # the first batch: compact types array [1] (0x02 0x01) then an empty tag section (0x00);
    # give it one unknown tag (tag 7, two bytes)
    batch = bytes.fromhex("00000000000000050000000000000009") + b"\x02\x01\x00"
    at = buf.index(batch)
    tagged = buf[: at + len(batch) - 1] + b"\x01\x07\x02ab" + buf[at + len(batch) :]
    state, _ = same_verdict(type(entity), tagged)
    assert state == "ok"
    cleaned = check_body(type(entity), tagged, 0)
    assert cleaned == buf
    assert entity_reader(type(entity))(cleaned, 0)[0] == entity


def test_batches_declaring_a_tagged_field_take_the_fast_walk() -> None:
    """shareq's ShareAcknowledge batches declare the release delay tag: the usual batch (none sent)
    is still stepped over in one loop, not walked field by field."""
    for module in (ack_v2, shareq_ack_v1, shareq_ack_v2):
        assert guard._is_ack_batch(module.AcknowledgementBatch)
    entity = request(shareq_ack_v2, "ShareAcknowledgeRequest", [[(0, [(5, 9, [1]), (10, 10, [3])])]])
    buf = encode(entity)
    assert same_verdict(type(entity), buf) == ("ok", (len(buf), []))
