"""Exactly-once mode: share group → stateless transform → topic, with no duplicate after any crash.

Switched on with ``.option("exactlyOnce", "true")`` on both the ``shareq`` source and the ``shareq``
sink of one query. One transaction per micro-batch, in the sink's driver-side commit ("claim, then
write"):

- The source never acknowledges. Each micro-batch's end offset (which Spark writes to
  ``<checkpoint>/offsets/N`` before running the batch) is its manifest: the acquired runs, the share
  group and the acquiring member's id.
- Executors have no broker side effects: ``write`` returns the output rows (and the source
  coordinates of rows flagged rejected) to the driver.
- ``commit(messages, N)`` reads the manifest from the checkpoint and, with a transactional producer
  whose id is stable per query (``shareq-spark-<queryId>``, so a restarted driver fences the old
  one and aborts its open transaction):

  1. **claims** the batch: TxnShareAcknowledge (KIP-1289) of every acquired record, ACCEPT, or
     REJECT for flagged rows (and decisions sent with ``acknowledge_failed``), in the acquiring
     member's name with member epoch -1. The broker moves the records ACQUIRED → TX_PENDING, a
     compare-and-set: it fails when the batch was committed before (a replay) or its lease was
     lost (lock expiry, a broker restart, the member's session ended);
  2. on a refused claim, aborts and returns: the batch is **dropped**, nothing is written, and its
     records are delivered again (to this query or another member);
  3. otherwise produces the output rows in the transaction and commits. The output and the
     acknowledgements become visible together, or not at all.

Only stateless queries: a dropped batch is redone from redelivered records, which is safe only
when nothing but the sink absorbed it. A query with state (``<checkpoint>/state``) is refused.

Each commit leaves a small report (records claimed, written, rejected, dropped and why, time in
the commit) under ``<checkpoint>/shareq-eos/``, read by :func:`eos_reports` (the demo's progress
line), and logs it.

Crash tests stop the commit at its points with :mod:`shareq.spark.faults`: ``sink.commit.start``,
``sink.after_claim``, ``sink.after_produce`` (the output sent, the transaction not ended),
``sink.after_endtxn``, ``sink.after_return`` (the commit done, Spark not yet told).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from shareq.client import AcknowledgeType, AckRange, ClientError, KafkaError, Producer, ShareGroupMetadata
from shareq.heap import freeze_once_per_process
from shareq.protocol import api_keys

from .acks import AckType, DecisionLog, encode_sink_announcement
from .cluster import Cluster, _client_kwargs
from .faults import fault, task_fault
from .offsets import Run, ShareBatchOffset, TopicPartition
from .options import OptionError, SinkOptions
from .schema import column
from .sink import OutputColumns, OutRow

log = logging.getLogger(__name__)

REPORTS_DIR = "shareq-eos"
REPORTS_KEPT = 100  # micro-batches whose reports are kept (Spark keeps 100 batches of metadata)
COMMIT_DEADLINE_S = 60.0  # retrying a commit through a broker restart
TRANSACTION_TIMEOUT_MS = 60_000
REJECT_COLUMNS = ("rejectTopic", "rejectPartition", "rejectOffset")

# The claim was refused because the records are not ACQUIRED by the manifest's member any more:
# already acknowledged (the batch committed before) or the lease was lost. Drop the batch.
_DROP = {
    ErrorCode.invalid_record_state: "already acknowledged or lease lost",
    ErrorCode.unknown_member_id: "member gone, lease lost",
    ErrorCode.fenced_member_epoch: "member fenced, lease lost",
    ErrorCode.stale_member_epoch: "member epoch stale, lease lost",
}
# This process is a zombie: a newer commit process of the same query took the transactional id.
_FENCED = {ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch}


# -- the executors' side -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EosMessage(WriterCommitMessage):
    """One task's output rows and the source records it flagged rejected; nothing was sent yet."""

    rows: tuple[OutRow, ...] = ()
    rejects: tuple[tuple[str, int, int], ...] = ()


def encode_rows(options: SinkOptions, batches: Iterator[Any]) -> EosMessage:
    """Arrow batches to output rows (and rejected source records); no broker side effects.

    A row whose ``rejectOffset`` is set is not written: its source record
    (``rejectTopic``, ``rejectPartition``, ``rejectOffset``) is REJECTed in the batch's transaction.
    """
    rows: list[OutRow] = []
    rejects: list[tuple[str, int, int]] = []
    for batch in batches:
        n = batch.num_rows
        columns = OutputColumns(batch, options.topic)
        reject_offsets = column(batch, "rejectOffset") or [None] * n
        reject_topics = column(batch, "rejectTopic") or [None] * n
        reject_partitions = column(batch, "rejectPartition") or [None] * n
        for i in range(n):
            if reject_offsets[i] is not None:
                if reject_topics[i] is None or reject_partitions[i] is None:
                    raise ValueError("a rejected row needs rejectTopic and rejectPartition too")
                rejects.append((str(reject_topics[i]), int(reject_partitions[i]), int(reject_offsets[i])))
                continue
            rows.append(columns.row(i))
    return EosMessage(tuple(rows), tuple(rejects))


# -- the checkpoint --------------------------------------------------------------------------------


class Checkpoint:
    """The query's checkpoint directory, local or remote (through pyarrow's file systems)."""

    def __init__(self, location: str) -> None:
        from pyarrow import fs

        if "://" not in location:
            location = os.path.abspath(location)
        self.fs, self.root = fs.FileSystem.from_uri(location)
        self._not_found = fs.FileType.NotFound

    def path(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *parts])

    def exists(self, *parts: str) -> bool:
        return bool(self.fs.get_file_info(self.path(*parts)).type != self._not_found)

    def read(self, *parts: str) -> str | None:
        if not self.exists(*parts):
            return None
        with self.fs.open_input_stream(self.path(*parts)) as f:
            return bytes(f.read()).decode()

    def write(self, text: str, *parts: str) -> None:
        self.fs.create_dir(self.path(*parts[:-1]), recursive=True)
        with self.fs.open_output_stream(self.path(*parts)) as f:
            f.write(text.encode())

    def names(self, *parts: str) -> list[str]:
        from pyarrow import fs

        if not self.exists(*parts):
            return []
        infos = self.fs.get_file_info(fs.FileSelector(self.path(*parts)))
        return [info.base_name for info in infos]

    def delete(self, *parts: str) -> None:
        self.fs.delete_file(self.path(*parts))

    def query_id(self) -> str:
        text = self.read("metadata")
        if text is None:
            raise OptionError(f"no query metadata in checkpoint {self.root}")
        return str(json.loads(text.splitlines()[0])["id"])

    def source_offsets(self, batch_id: int) -> list[str] | None:
        """The per-source lines of ``offsets/N`` (Spark's offset log v1), None when absent."""
        text = self.read("offsets", str(batch_id))
        if text is None:
            return None
        lines = text.splitlines()
        if not lines or lines[0].strip() != "v1":
            raise OptionError(
                f"unknown offset log format in {self.path('offsets', str(batch_id))}: {lines[:1]}"
            )
        return lines[2:]


def batch_manifests(checkpoint: Checkpoint, batch_id: int) -> list[ShareBatchOffset]:
    """The exactly-once share manifests micro-batch ``batch_id`` has to claim.

    A source whose offset did not move since the previous batch (another source brought the data)
    has nothing to claim. Raises when no source of the query runs in exactly-once mode."""
    lines = checkpoint.source_offsets(batch_id)
    if lines is None:
        raise OptionError(f"micro-batch {batch_id} has no offsets/{batch_id} in checkpoint {checkpoint.root}")
    previous = checkpoint.source_offsets(batch_id - 1) if batch_id > 0 else None
    found = False
    out = []
    for index, line in enumerate(lines):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if not isinstance(data, dict) or not data.get("eos"):
            continue
        found = True
        if previous is not None and index < len(previous) and previous[index] == line:
            continue
        manifest = ShareBatchOffset.from_json(data)
        if manifest.acquired:
            out.append(manifest)
    if not found:
        raise OptionError(
            "the shareq sink has exactlyOnce set but the query has no shareq source with "
            ".option('exactlyOnce', 'true'): nothing to claim the output against"
        )
    return out


# -- reports ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class BatchReport:
    """What one commit of a micro-batch did."""

    batch_id: int
    claimed: int = 0
    rejected: int = 0
    released: int = 0
    written: int = 0
    dropped: int = 0
    reason: str = ""
    commit_ms: float = 0.0
    attempts: int = 1
    # Rows of an earlier attempt whose EndTxn(commit) got no answer: the broker may have committed
    # them (then this attempt's claim is refused as already acknowledged).
    in_doubt: int = 0
    at: float = field(default_factory=time.time)

    def line(self) -> str:
        if self.dropped:
            doubt = (
                f"; an earlier attempt's commit of {self.in_doubt} rows got no answer and may have completed"
                if self.in_doubt
                else ""
            )
            return (
                f"batch {self.batch_id}: dropped {self.dropped} records ({self.reason}); nothing written, "
                f"the records are delivered again{doubt}"
            )
        return (
            f"batch {self.batch_id}: claimed {self.claimed} records ({self.rejected} rejected, "
            f"{self.released} released), wrote {self.written}, commit {self.commit_ms:.0f} ms"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "batchId": self.batch_id,
            "claimed": self.claimed,
            "rejected": self.rejected,
            "released": self.released,
            "written": self.written,
            "dropped": self.dropped,
            "reason": self.reason,
            "commitMs": round(self.commit_ms, 1),
            "attempts": self.attempts,
            "inDoubt": self.in_doubt,
            "at": self.at,
        }


def eos_reports(checkpoint_location: str) -> list[dict[str, Any]]:
    """Every kept commit report of an exactly-once query, oldest first (a replayed batch has several)."""
    checkpoint = Checkpoint(checkpoint_location)
    out = []
    for name in checkpoint.names(REPORTS_DIR):
        text = checkpoint.read(REPORTS_DIR, name)
        if text:
            out.append(json.loads(text))
    return sorted(out, key=lambda r: (r["batchId"], r["at"]))


# -- the claim -------------------------------------------------------------------------------------


def claim_ranges(
    manifest: ShareBatchOffset,
    rejects: set[tuple[str, int, int]],
    decisions: DecisionLog | None,
) -> tuple[list[tuple[str, int, int, int, AckType]], int, int]:
    """(ranges to stage, rejected count, released count) for one manifest.

    ACCEPT by default; REJECT for flagged rows and rejection decisions. A RELEASE decision cannot be
    staged in a transaction: those records are left out of the claim and come back when their lock
    lapses."""
    if decisions is not None:
        decisions.poll()
        decided = decisions.split(manifest.acquired)
    else:
        decided = [
            (topic, partition, first, last, AckType.ACCEPT)
            for (topic, partition), runs in sorted(manifest.acquired.items())
            for first, last, _ in runs
        ]
    out: list[tuple[str, int, int, int, AckType]] = []
    rejected = released = 0
    for topic, partition, first, last, kind in decided:
        if kind == AckType.RELEASE:
            released += last - first + 1
            continue
        if kind != AckType.ACCEPT:
            rejected += last - first + 1
            out.append((topic, partition, first, last, kind))
            continue
        start = first
        for offset in sorted(
            o for t, p, o in rejects if t == topic and p == partition and first <= o <= last
        ):
            if offset > start:
                out.append((topic, partition, start, offset - 1, AckType.ACCEPT))
            out.append((topic, partition, offset, offset, AckType.REJECT))
            rejected += 1
            start = offset + 1
        if start <= last:
            out.append((topic, partition, start, last, AckType.ACCEPT))
    return out, rejected, released


def _held(acquired: dict[TopicPartition, tuple[Run, ...]]) -> set[tuple[str, int, int]]:
    return {
        (t, p, o)
        for (t, p), runs in acquired.items()
        for first, last, _ in runs
        for o in range(first, last + 1)
    }


class Committer:
    """The query's transactional commit, one per commit process (cached across micro-batches)."""

    def __init__(self, options: SinkOptions, checkpoint: Checkpoint) -> None:
        self.options = options
        self.checkpoint = checkpoint
        self.transactional_id = f"shareq-spark-{checkpoint.query_id()}"
        self._producer: Producer | None = None
        self._cluster: Cluster | None = None
        self._decisions: dict[str, DecisionLog] = {}
        self._announced: set[tuple[str, str]] = set()  # (group, source session) told of this sink
        self._ending = False  # an EndTxn(commit) was sent and not answered yet

    def _reset(self) -> None:
        for closable in (self._producer, self._cluster):
            if closable is not None:
                try:
                    closable.close()
                except Exception as exc:  # a dead connection: nothing to flush
                    log.info("closing a broken client: %s", exc)
        self._producer = None
        self._cluster = None
        self._decisions.clear()

    def producer(self) -> Producer:
        if self._producer is None:
            producer = Producer(
                self.options.connect.bootstrap,
                transactional_id=self.transactional_id,
                transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
                **_client_kwargs(self.options.connect),
            )
            # Fences an earlier commit process of this query; the coordinator aborts its open
            # transaction (and waits out one it already decided).
            producer.init_transactions()
            self._producer = producer
        return self._producer

    def cluster(self) -> Cluster:
        """The side topic's connections (reading decisions, writing announcements)."""
        if self._cluster is None:
            self._cluster = Cluster(self.options.connect)
        return self._cluster

    def decisions(self, group: str) -> DecisionLog | None:
        log_ = self._decisions.get(group)
        if log_ is None:
            try:
                log_ = DecisionLog(
                    self.cluster(), topic=self.options.ack_topic, group_id=group, from_earliest=True
                )
            except ClientError as exc:
                log.info(
                    "no decisions topic %s (%s); accepting every row not flagged", self.options.ack_topic, exc
                )
                return None
            self._decisions[group] = log_
        return log_

    def announce(self, manifests: Sequence[ShareBatchOffset]) -> None:
        """Tell each manifest's source session, once, that an exactly-once sink claims its batches.

        The source checks for this before it goes on past its first committed batch: a batch it
        handed out is claimed, or dropped and redelivered, only by such a sink. Its records' state
        cannot tell the two apart from a sink that never claims: a claimed batch below the start
        offset is skipped silently by a probe, and a dropped one may still be held by the member."""
        for manifest in manifests:
            key = (manifest.group, manifest.session)
            if key in self._announced or self.decisions(manifest.group) is None:
                continue  # (without the side topic there is nowhere to announce)
            self.cluster().produce(
                [encode_sink_announcement(manifest.group, manifest.session, topic=self.options.ack_topic)]
            )
            self._announced.add(key)

    def commit(self, messages: Sequence[WriterCommitMessage | None], batch_id: int) -> BatchReport:
        fault("sink.commit.start", batch_id)
        if self.checkpoint.exists("state"):
            raise OptionError(
                "exactlyOnce supports stateless queries only (map, filter, select, UDFs): this query "
                "keeps state, which a dropped and redelivered micro-batch would count twice"
            )
        started = time.monotonic()
        manifests = batch_manifests(self.checkpoint, batch_id)
        rows: list[OutRow] = []
        rejects: set[tuple[str, int, int]] = set()
        for message in messages:
            if isinstance(message, EosMessage):
                rows.extend(message.rows)
                rejects.update(message.rejects)
        held: set[tuple[str, int, int]] = set()
        for manifest in manifests:
            held |= _held(dict(manifest.acquired)) if rejects else set()
        strays = rejects - held
        if strays:
            raise ValueError(
                f"rows flag {len(strays)} source records rejected that micro-batch {batch_id} did not read, "
                f"e.g. {sorted(strays)[:3]}: rejectTopic/rejectPartition/rejectOffset must name the row's "
                "source record"
            )
        deadline = started + COMMIT_DEADLINE_S
        attempt = 0
        self._ending = False
        in_doubt = 0
        while True:
            attempt += 1
            try:
                report = self._attempt(manifests, rows, rejects, batch_id)
                break
            except KafkaError as exc:
                if exc.code in _FENCED:
                    self._reset()
                    raise RuntimeError(
                        f"micro-batch {batch_id}: this commit process was fenced by a newer run of the "
                        "query (same checkpoint); it writes nothing"
                    ) from exc
                if time.monotonic() >= deadline:
                    raise
                log.warning("micro-batch %d: commit attempt %d failed (%s); retrying", batch_id, attempt, exc)
            except ClientError as exc:
                if time.monotonic() >= deadline:
                    raise
                log.warning("micro-batch %d: commit attempt %d failed (%s); retrying", batch_id, attempt, exc)
            if self._ending:
                in_doubt = len(rows)
            # A new producer with the same id aborts what the failed attempt left open.
            self._reset()
            time.sleep(min(0.2 * attempt, 2.0))
        report.attempts = attempt
        report.in_doubt = in_doubt if report.dropped else 0
        report.commit_ms = (time.monotonic() - started) * 1000.0
        self._report(report)
        fault("sink.after_return", batch_id)
        return report

    def _attempt(
        self,
        manifests: list[ShareBatchOffset],
        rows: list[OutRow],
        rejects: set[tuple[str, int, int]],
        batch_id: int,
    ) -> BatchReport:
        report = BatchReport(batch_id)
        if not manifests:
            if rows:
                raise ValueError(
                    f"micro-batch {batch_id} claimed no source records but has {len(rows)} rows to write"
                )
            return report
        self.announce(manifests)
        producer = self.producer()
        producer.begin_transaction()
        try:
            for manifest in manifests:
                ranges, rejected, released = claim_ranges(manifest, rejects, self.decisions(manifest.group))
                report.rejected += rejected
                report.released += released
                report.claimed += sum(last - first + 1 for _, _, first, last, _ in ranges)
                metadata = ShareGroupMetadata(
                    group_id=manifest.group, member_id=manifest.member, member_epoch=-1
                )
                producer.send_share_acknowledgements_to_transaction(
                    [
                        AckRange(
                            topic_id=producer.cluster.topic(topic).topic_id,
                            partition=partition,
                            first_offset=first,
                            last_offset=last,
                            type=AcknowledgeType(int(kind)),
                        )
                        for topic, partition, first, last, kind in ranges
                    ],
                    metadata,
                )
        except KafkaError as exc:
            reason = _DROP.get(exc.code)
            if reason is None:
                raise
            producer.abort_transaction()
            return BatchReport(
                batch_id,
                dropped=sum(m.record_count for m in manifests),
                reason=f"claim refused: {exc.code.name.lower()}, {reason}",
            )
        fault("sink.after_claim", batch_id)
        for topic, partition, key, value, headers in rows:
            producer.send(topic, value, key=key, headers=headers, partition=partition)
        producer.flush()
        report.written = len(rows)
        fault("sink.after_produce", batch_id)
        self._ending = True
        producer.commit_transaction()
        self._ending = False
        fault("sink.after_endtxn", batch_id)
        return report

    def _report(self, report: BatchReport) -> None:
        if report.dropped:
            log.warning("exactly once: %s", report.line())
        else:
            log.info("exactly once: %s", report.line())
        try:
            name = f"{report.batch_id}-{uuid.uuid4().hex[:8]}.json"
            self.checkpoint.write(json.dumps(report.to_json()), REPORTS_DIR, name)
            if report.batch_id % 50 == 0:
                for old in self.checkpoint.names(REPORTS_DIR):
                    if int(old.split("-")[0]) < report.batch_id - REPORTS_KEPT:
                        self.checkpoint.delete(REPORTS_DIR, old)
        except (OSError, ValueError) as exc:  # the report is for people; the commit is done
            log.warning("could not write the commit report of batch %d: %s", report.batch_id, exc)


_COMMITTERS: dict[tuple[str, SinkOptions], Committer] = {}
_COMMITTERS_LOCK = threading.Lock()


def committer(options: SinkOptions) -> Committer:
    """The commit process's committer for this query (one producer per process and query)."""
    location = options.checkpoint_location
    if not location:
        raise OptionError("exactlyOnce needs the query's checkpointLocation")
    with _COMMITTERS_LOCK:
        found = _COMMITTERS.get((location, options))
        if found is None:
            found = _COMMITTERS[(location, options)] = Committer(options, Checkpoint(location))
        return found


class ExactlyOnceStreamWriter(DataSourceStreamArrowWriter):
    """The exactly-once sink: tasks encode, the driver's commit claims, writes and commits."""

    def __init__(self, options: SinkOptions) -> None:
        """Made on the driver as the query starts: refuses there when the query or the broker lacks
        what the commits need."""
        if not options.checkpoint_location:
            raise OptionError("exactlyOnce needs .option('checkpointLocation', ...) on the query")
        with Cluster(options.connect) as cluster:
            cluster.require("the shareq sink has exactlyOnce set", api_keys.TXN_SHARE_ACKNOWLEDGE)
        self.options = options

    def write(self, iterator: Iterator[Any]) -> EosMessage:
        task_fault()
        message = encode_rows(self.options, iterator)
        freeze_once_per_process()  # as the other sinks' tasks: see read_with_worker_cluster
        return message

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        committer(self.options).commit(messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing was sent: tasks have no broker side effects in exactly-once mode."""
