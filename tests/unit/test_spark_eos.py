"""The exactly-once mode's pure parts: manifests in the checkpoint, claim ranges, row encoding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_support import require

require("pyspark")

import pyarrow as pa

from shareq.spark.acks import AckType
from shareq.spark.eos import Checkpoint, batch_manifests, claim_ranges, encode_rows
from shareq.spark.offsets import ShareBatchOffset
from shareq.spark.options import ConnectOptions, OptionError, SinkOptions

MANIFEST = ShareBatchOffset(
    seq=3,
    session="s1",
    acquired={("in", 0): ((10, 19, 1),), ("in", 2): ((0, 4, 2), (7, 7, 1))},
    exactly_once=True,
    group="g",
    member="m-1",
)


def _offsets(ckpt: Path, batch: int, *sources: dict[str, object] | str) -> None:
    (ckpt / "offsets").mkdir(parents=True, exist_ok=True)
    lines = ["v1", json.dumps({"batchWatermarkMs": 0})]
    lines += [s if isinstance(s, str) else json.dumps(s) for s in sources]
    (ckpt / "offsets" / str(batch)).write_text("\n".join(lines))


def test_the_manifest_round_trips_and_plain_offsets_stay_as_they_were() -> None:
    assert ShareBatchOffset.from_json(json.loads(json.dumps(MANIFEST.to_json()))) == MANIFEST
    plain = ShareBatchOffset(seq=1, session="s", acquired={("in", 0): ((0, 1, 1),)})
    assert set(plain.to_json()) == {"seq", "session", "acquired"}


def test_manifests_are_read_from_the_offset_log(tmp_path: Path) -> None:
    checkpoint = Checkpoint(str(tmp_path))
    other = {"logOffset": 5}  # another source of the same query
    _offsets(tmp_path, 0, other, MANIFEST.to_json())
    assert batch_manifests(checkpoint, 0) == [MANIFEST]
    # The share source did not move since the previous batch (the other source did): nothing to claim.
    _offsets(tmp_path, 1, {"logOffset": 9}, MANIFEST.to_json())
    assert batch_manifests(checkpoint, 1) == []
    # The first, empty micro-batch at the initial offset: nothing to claim, not refused.
    _offsets(tmp_path, 5, ShareBatchOffset(seq=0, exactly_once=True, group="g").to_json())
    assert batch_manifests(checkpoint, 5) == []
    # No exactly-once share source at all: refused.
    _offsets(tmp_path, 2, other, ShareBatchOffset(seq=4, session="s").to_json())
    with pytest.raises(OptionError, match="no shareq source with"):
        batch_manifests(checkpoint, 2)
    with pytest.raises(OptionError, match="no offsets/7"):
        batch_manifests(checkpoint, 7)
    (tmp_path / "offsets" / "8").write_text("v2\n{}\n{}")
    with pytest.raises(OptionError, match="unknown offset log format"):
        batch_manifests(checkpoint, 8)


def test_claim_accepts_the_batch_and_rejects_flagged_rows() -> None:
    ranges, rejected, released = claim_ranges(MANIFEST, {("in", 0, 12), ("in", 0, 19), ("in", 2, 7)}, None)
    assert ranges == [
        ("in", 0, 10, 11, AckType.ACCEPT),
        ("in", 0, 12, 12, AckType.REJECT),
        ("in", 0, 13, 18, AckType.ACCEPT),
        ("in", 0, 19, 19, AckType.REJECT),
        ("in", 2, 0, 4, AckType.ACCEPT),
        ("in", 2, 7, 7, AckType.REJECT),
    ]
    assert (rejected, released) == (3, 0)
    # Every acquired offset is claimed exactly once.
    claimed = [(t, p, o) for t, p, first, last, _ in ranges for o in range(first, last + 1)]
    assert len(claimed) == len(set(claimed)) == MANIFEST.record_count


def test_rows_are_encoded_and_rejected_rows_are_not_written() -> None:
    options = SinkOptions(connect=ConnectOptions(bootstrap="127.0.0.1:1"), topic="out", exactly_once=True)
    batch = pa.RecordBatch.from_pydict(
        {
            "key": [b"k1", None, b"k3"],
            "value": ["a", "b", "c"],
            "rejectTopic": [None, "in", None],
            "rejectPartition": [None, 2, None],
            "rejectOffset": [None, 7, None],
        }
    )
    message = encode_rows(options, iter([batch]))
    assert message.rows == (("out", None, b"k1", b"a", ()), ("out", None, b"k3", b"c", ()))
    assert message.rejects == (("in", 2, 7),)
    with pytest.raises(ValueError, match="rejectTopic and rejectPartition"):
        encode_rows(options, iter([pa.RecordBatch.from_pydict({"value": ["x"], "rejectOffset": [1]})]))
