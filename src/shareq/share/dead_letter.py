"""Dead-letter queues (KIP-1191), sans-I/O: which topic, which rule refuses it, what to write, when to retry.

Records a share group gives up on (REJECTed, or released at the delivery limit) go ARCHIVING, durably;
the shell's writer then copies them to the group's dead-letter topic and makes them ARCHIVED. This
module decides, without I/O:

- ``check_target``: Kafka's write-time validation rules, in Kafka's order and words, plus one of
  shareq's (the DLQ must not be the source topic); a refusal is a ``DlqRefusal`` the writer logs
  and counts, then archives without a DLQ record (an operator's configuration caused it).
- ``dlq_record_headers``: the ``__dlq.errors.*`` headers of one dead letter.
- ``DeadLetterPlanner``: which share-partitions have dead letters to write and when; a failure that
  can pass (a full disk, a topic being created) is retried with backoff (1 s doubling to 30 s,
  jitter 0.2, as Kafka's), never given up: unlike Kafka's best effort, nothing is lost.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

HEADER_PREFIX = "__dlq.errors."
HEADER_TOPIC = HEADER_PREFIX + "topic"
HEADER_PARTITION = HEADER_PREFIX + "partition"
HEADER_OFFSET = HEADER_PREFIX + "offset"
HEADER_GROUP = HEADER_PREFIX + "group"
HEADER_DELIVERY_COUNT = HEADER_PREFIX + "delivery.count"
HEADER_MESSAGE = HEADER_PREFIX + "message"

CAUSE_REJECTED = "Offset rejected by client."
CAUSE_DELIVERY_COUNT = "Offset delivery count exceeded the threshold."

RETRY_BACKOFF_MS = 1_000
RETRY_BACKOFF_MAX_MS = 30_000
RETRY_JITTER = 0.2


def cause_of(delivery_count: int, delivery_count_limit: int) -> str:
    """The cause text of a dead letter, inferred as Kafka does after a restart (KAFKA-20672): a
    delivery count at the limit means the deliveries ran out, anything below it a client REJECT."""
    return CAUSE_DELIVERY_COUNT if delivery_count >= delivery_count_limit else CAUSE_REJECTED


def dlq_record_headers(
    *, topic: str, partition: int, offset: int, group: str, delivery_count: int, cause: str
) -> tuple[tuple[str, bytes], ...]:
    """The headers Kafka puts on a dead letter: UTF-8 text, numbers in decimal."""
    return (
        (HEADER_TOPIC, topic.encode()),
        (HEADER_PARTITION, str(partition).encode()),
        (HEADER_OFFSET, str(offset).encode()),
        (HEADER_GROUP, group.encode()),
        (HEADER_DELIVERY_COUNT, str(delivery_count).encode()),
        (HEADER_MESSAGE, cause.encode()),
    )


def dlq_partition(source_partition: int, dlq_partitions: int) -> int:
    """The DLQ partition of a source partition's dead letters (source partition mod DLQ count)."""
    return source_partition % dlq_partitions


@dataclass(frozen=True, slots=True, kw_only=True)
class DlqTopicView:
    """What the broker knows of a would-be DLQ topic when a dead letter is to be written."""

    exists: bool
    opted_in: bool = False
    """Its ``errors.deadletterqueue.group.enable`` is true."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DlqRefusal:
    """A write-time validation failure: the dead letter is archived without a DLQ record."""

    rule: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DlqTarget:
    """The validated DLQ topic; ``create`` when it is missing and auto-creation is on."""

    topic: str
    create: bool


def check_target(
    *,
    group: str,
    topic: str,
    source_topic: str,
    prefix: str,
    auto_create: bool,
    view: DlqTopicView,
) -> DlqTarget | DlqRefusal:
    """Kafka's write-time rules (ShareGroupDLQValidator) in order, then shareq's source-topic rule."""
    if not topic:
        return DlqRefusal(
            rule="empty", message=f"Configured DLQ topic name in share group: {group} is empty."
        )
    if topic.startswith("__"):
        return DlqRefusal(
            rule="internal",
            message=f"Configured DLQ topic name in share group: {group} cannot start with __, "
            f"topic: {topic}.",
        )
    if view.exists and not view.opted_in:
        return DlqRefusal(
            rule="not-enabled",
            message=f"DLQ is not enabled on configured DLQ topic for share group: {group}, topic: {topic}",
        )
    if prefix and not topic.startswith(prefix):
        return DlqRefusal(
            rule="prefix",
            message="Configured DLQ topic name does not comply with the DLQ topic prefix in share "
            f"group: {group}, topic: {topic}, prefix: {prefix}",
        )
    if not view.exists and not auto_create:
        return DlqRefusal(
            rule="missing",
            message="DLQ topic does not exist and auto create is disabled on cluster for share "
            f"group: {group}, topic: {topic}.",
        )
    if topic == source_topic:
        return DlqRefusal(
            rule="source",
            message=f"DLQ topic of share group: {group} is the topic its dead letters come from, "
            f"topic: {topic}.",
        )
    return DlqTarget(topic=topic, create=not view.exists)


def retry_delay_ms(attempt: int, jitter: float) -> int:
    """Backoff before retry ``attempt`` (1-based): 1 s doubling to 30 s, times 1 +/- 0.2 from
    ``jitter`` in [-1, 1] (the shell draws it; tests pass it)."""
    base = min(RETRY_BACKOFF_MS * (2 ** max(attempt - 1, 0)), RETRY_BACKOFF_MAX_MS)
    return max(int(base * (1 + RETRY_JITTER * max(-1.0, min(1.0, jitter)))), 1)


K = TypeVar("K", bound=Hashable)


class DeadLetterPlanner(Generic[K]):
    """Share-partitions with dead letters to write, each due now or after a backoff.

    ``mark(key, now)`` says a share-partition has ARCHIVING records (due at once, unless it is
    backing off); ``due(now)`` takes the keys to work on; the shell then reports ``written`` (it
    may have more: mark again) or ``failed`` (retry after a backoff). ``next_deadline()`` feeds the
    shell's timer. The planner never gives up on a key: a failure that cannot pass is the
    validation's refusal, which the shell settles by archiving.
    """

    def __init__(self) -> None:
        self._due: dict[K, int] = {}
        self._attempts: dict[K, int] = {}
        self._heap: list[tuple[int, int, K]] = []
        self._seq = 0

    def __len__(self) -> int:
        return len(self._due)

    def pending(self, key: K) -> bool:
        return key in self._due

    def attempts(self, key: K) -> int:
        """Failed attempts in a row for ``key`` (0 after a success)."""
        return self._attempts.get(key, 0)

    def mark(self, key: K, now: int) -> None:
        if key in self._due:
            return
        self._push(key, now)

    def _push(self, key: K, at: int) -> None:
        self._due[key] = at
        self._seq += 1
        heapq.heappush(self._heap, (at, self._seq, key))

    def due(self, now: int) -> list[K]:
        """Every key due at ``now``, taken off the plan (the shell reports back on each)."""
        out: list[K] = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            at, _, key = heapq.heappop(heap)
            if self._due.get(key) == at:
                del self._due[key]
                out.append(key)
        return out

    def next_deadline(self) -> int | None:
        heap = self._heap
        while heap and self._due.get(heap[0][2]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def written(self, key: K) -> None:
        self._attempts.pop(key, None)

    def failed(self, key: K, now: int, jitter: float = 0.0) -> int:
        """A write of ``key`` failed with an error that can pass: due again after a backoff
        (returned, absolute ms)."""
        attempt = self._attempts.get(key, 0) + 1
        self._attempts[key] = attempt
        at = now + retry_delay_ms(attempt, jitter)
        self._due.pop(key, None)
        self._push(key, at)
        return at

    def forget(self, key: K) -> None:
        self._due.pop(key, None)
        self._attempts.pop(key, None)
