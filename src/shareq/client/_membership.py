"""Share-group membership: the ShareGroupHeartbeat loop on its own thread and connection.

The member id is generated here (22-char base64 uuid). Epoch 0 joins with the subscribed topic names; later
heartbeats send the current epoch and null names; FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID rejoin at epoch 0
with the same id; NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE look the coordinator up again; leaving sends
epoch -1.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.protocol.api_keys import SHARE_GROUP_HEARTBEAT

from ._share_requests import build_heartbeat
from ._share_state import TopicIdPartition, member_id_from_uuid
from .cluster import COORDINATOR_ERRORS, Cluster
from .errors import BrokerConnectionError, ClientError, KafkaError

LEAVE_EPOCH = -1
_REJOIN = {ErrorCode.fenced_member_epoch, ErrorCode.unknown_member_id}


class Membership:
    """Keeps a member in a share group and publishes its assignment."""

    def __init__(
        self,
        cluster: Cluster,
        group_id: str,
        topics: Sequence[str],
        *,
        rack_id: str | None = None,
        on_assignment: Callable[[frozenset[TopicIdPartition]], None] | None = None,
        on_fenced: Callable[[], None] | None = None,
    ) -> None:
        self.cluster = cluster
        self.group_id = group_id
        self.topics = tuple(topics)
        self.rack_id = rack_id
        self.member_id = member_id_from_uuid(uuid.uuid4())
        self.member_epoch = 0
        self.heartbeat_interval = 5.0
        self.assignment: frozenset[TopicIdPartition] = frozenset()
        self.error: BaseException | None = None
        self._on_assignment = on_assignment
        self._on_fenced = on_fenced
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._send_names = True
        self.heartbeats = 0

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name=f"share-heartbeat-{self.group_id}", daemon=True
        )
        self._thread.start()

    def stop(self, *, leave: bool = True) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=self.cluster.request_timeout + 5)
        if leave and self.member_epoch > 0:
            # If this fails the coordinator expires the member anyway.
            with contextlib.suppress(KafkaError, BrokerConnectionError):
                self._heartbeat(LEAVE_EPOCH)
        self.member_epoch = LEAVE_EPOCH

    def wait_for_assignment(self, timeout: float) -> bool:
        """Block until the member has an epoch (joined) or ``timeout`` passes; re-raise a fatal error."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.member_epoch <= 0 and self.error is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        if self.error is not None:
            raise self.error
        return True

    def wait_for_partitions(self, timeout: float) -> frozenset[TopicIdPartition]:
        """The assignment, waiting up to ``timeout`` while it is empty; re-raise a fatal error."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self.assignment and self.error is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
        if self.error is not None:
            raise self.error
        return self.assignment

    # -- the loop ----------------------------------------------------------------------------------

    def _run(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            try:
                self._heartbeat(self.member_epoch)
                backoff = 0.1
                wait = self.heartbeat_interval
            except (BrokerConnectionError, KafkaError) as exc:
                if (
                    isinstance(exc, KafkaError)
                    and not exc.retriable
                    and exc.code not in _REJOIN | COORDINATOR_ERRORS
                ):
                    self._fail(exc)
                    return
                wait = backoff
                backoff = min(backoff * 2, 2.0)
            except ClientError as exc:
                self._fail(exc)
                return
            self._wake.wait(wait)
            self._wake.clear()

    def _fail(self, exc: BaseException) -> None:
        with self._cond:
            self.error = exc
            self._cond.notify_all()

    def _heartbeat(self, epoch: int) -> None:
        conn = self.cluster.coordinator(self.group_id)
        _v, m = conn.module(SHARE_GROUP_HEARTBEAT)
        request = build_heartbeat(
            m,
            group_id=self.group_id,
            member_id=self.member_id,
            epoch=epoch,
            topics=self.topics if (epoch == 0 or self._send_names) else None,
            rack_id=self.rack_id,
        )
        try:
            response = conn.send(request)
        except BrokerConnectionError:
            self.cluster.forget_coordinator(self.group_id)
            raise
        self.heartbeats += 1
        self._handle(response, epoch)

    def _handle(self, response: Any, sent_epoch: int) -> None:
        code = response.error_code
        if code in COORDINATOR_ERRORS:
            self.cluster.forget_coordinator(self.group_id)
            raise KafkaError(code, response.error_message, context="ShareGroupHeartbeat")
        if code in _REJOIN:
            self.member_epoch = 0
            self._send_names = True
            self._publish(frozenset())
            if self._on_fenced is not None:
                self._on_fenced()
            raise KafkaError(code, response.error_message, context="ShareGroupHeartbeat")
        if code != ErrorCode.none:
            raise KafkaError(code, response.error_message, context="ShareGroupHeartbeat")
        if sent_epoch == LEAVE_EPOCH:
            return
        if response.member_id:
            self.member_id = response.member_id
        self.heartbeat_interval = max(response.heartbeat_interval.total_seconds(), 0.05)
        self._send_names = False
        with self._cond:
            self.member_epoch = int(response.member_epoch)
            self._cond.notify_all()
        if response.assignment is not None:
            self._publish(
                frozenset(
                    (tp.topic_id, int(p))
                    for tp in response.assignment.topic_partitions
                    for p in tp.partitions
                )
            )

    def _publish(self, assignment: frozenset[TopicIdPartition]) -> None:
        with self._cond:
            changed = assignment != self.assignment
            self.assignment = assignment
            self._cond.notify_all()
        if changed and self._on_assignment is not None:
            self._on_assignment(assignment)
