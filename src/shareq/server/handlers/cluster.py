"""DescribeCluster, DescribeQuorum, DescribeLogDirs, AlterReplicaLogDirs, ElectLeaders and the
partition-reassignment calls.

One broker is the whole cluster: it is the controller (the one voter of the metadata quorum, and
its leader), holds the one log directory and leads every partition, so elections are never
needed, no replica ever moves and no reassignment is ever in progress. The answers are those of a
one-node Kafka 4.4.
"""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.protocol import VersionRange
from shareq.protocol.api_keys import (
    ALTER_PARTITION_REASSIGNMENTS,
    ALTER_REPLICA_LOG_DIRS,
    DESCRIBE_CLUSTER,
    DESCRIBE_LOG_DIRS,
    DESCRIBE_QUORUM,
    ELECT_LEADERS,
    LIST_PARTITION_REASSIGNMENTS,
)

from ..acl_operations import CLUSTER_OPERATIONS, authorized
from ..context import NO_THROTTLE, RequestContext

BROKERS_ENDPOINT = 1


def handle_describe_cluster(request: Any, ctx: RequestContext) -> Any:
    broker = ctx.broker
    if getattr(request, "endpoint_type", BROKERS_ENDPOINT) != BROKERS_ENDPOINT:
        return ctx.build(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.unsupported_endpoint_type,
            error_message="The request was sent to an endpoint of type BROKER, but we wanted an endpoint "
            "of type CONTROLLER",
            cluster_id=broker.topics.cluster_id,
            brokers=(),
        )
    node = ctx.build(
        "DescribeClusterBroker",
        broker_id=broker.node_id,
        host=ctx.advertised_host,
        port=ctx.advertised_port,
        rack=broker.config["broker.rack"],
        is_fenced=False,
    )
    return ctx.build(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=BROKERS_ENDPOINT,
        cluster_id=broker.topics.cluster_id,
        controller_id=broker.node_id,
        brokers=(node,),
        cluster_authorized_operations=authorized(
            bool(request.include_cluster_authorized_operations), CLUSTER_OPERATIONS
        ),
    )


def handle_describe_log_dirs(request: Any, ctx: RequestContext) -> Any:
    """The data directory as the one log dir: every partition (internal topics too) or those asked."""
    broker = ctx.broker
    wanted: dict[str, set[int]] | None = None
    if request.topics is not None:
        wanted = {t.topic: set(t.partitions) for t in request.topics}
    by_topic: dict[str, list[Any]] = {}
    for (topic, index), partition in sorted(broker.partitions.items()):
        if wanted is not None and index not in wanted.get(topic, ()):
            continue
        by_topic.setdefault(topic, []).append(
            ctx.build(
                "DescribeLogDirsPartition",
                partition_index=index,
                partition_size=partition.log.size_bytes,
                offset_lag=0,
                is_future_key=False,
            )
        )
    directory = broker.data_dir.resolve()
    try:
        usage = shutil.disk_usage(directory)
        total, usable = usage.total, usage.free
    except OSError:
        total = usable = -1
    result = ctx.build(
        "DescribeLogDirsResult",
        error_code=ErrorCode.none,
        log_dir=str(directory),
        topics=tuple(
            ctx.build("DescribeLogDirsTopic", name=name, partitions=tuple(parts))
            for name, parts in by_topic.items()
        ),
        total_bytes=total,
        usable_bytes=usable,
    )
    return ctx.build(throttle_time=NO_THROTTLE, error_code=ErrorCode.none, results=(result,))


def handle_elect_leaders(request: Any, ctx: RequestContext) -> Any:
    """The one broker already leads every partition: ELECTION_NOT_NEEDED for each named one
    (Kafka leaves those out when all partitions are asked for)."""
    broker = ctx.broker
    results = []
    for wanted in request.topic_partitions or ():
        partitions = []
        for index in wanted.partitions:
            if broker.partition(wanted.topic, index) is None:
                code, message = (
                    ErrorCode.unknown_topic_or_partition,
                    "The partition does not exist.",
                )
            else:
                code, message = (
                    ErrorCode.election_not_needed,
                    "Leader election not needed for topic partition.",
                )
            partitions.append(
                ctx.build("PartitionResult", partition_id=index, error_code=code, error_message=message)
            )
        results.append(
            ctx.build("ReplicaElectionResult", topic=wanted.topic, partition_result=tuple(partitions))
        )
    return ctx.build(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, replica_election_results=tuple(results)
    )


def handle_list_partition_reassignments(request: Any, ctx: RequestContext) -> Any:
    return ctx.build(throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None, topics=())


def handle_alter_partition_reassignments(request: Any, ctx: RequestContext) -> Any:
    """Moving a replica needs a second broker: a reassignment onto this broker alone is a no-op,
    one naming another broker is INVALID_REPLICA_ASSIGNMENT, a cancellation finds nothing."""
    broker = ctx.broker
    responses = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            code, message = ErrorCode.none, None
            if broker.partition(topic.name, wanted.partition_index) is None:
                code, message = ErrorCode.unknown_topic_or_partition, "The partition does not exist."
            elif wanted.replicas is None:
                code, message = (
                    ErrorCode.no_reassignment_in_progress,
                    "No ongoing reassignment for partition.",
                )
            elif tuple(wanted.replicas) != (broker.node_id,):
                code, message = (
                    ErrorCode.invalid_replica_assignment,
                    f"The manual partition assignment includes broker(s) that are not registered: "
                    f"only broker {broker.node_id} is.",
                )
            partitions.append(
                ctx.build(
                    "ReassignablePartitionResponse",
                    partition_index=wanted.partition_index,
                    error_code=code,
                    error_message=message,
                )
            )
        responses.append(
            ctx.build("ReassignableTopicResponse", name=topic.name, partitions=tuple(partitions))
        )
    return ctx.build(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None, responses=tuple(responses)
    )


METADATA_TOPIC = "__cluster_metadata"
QUORUM_EPOCH = 1
"""The metadata quorum's leader epoch: one voter, elected once, never again."""
_NOT_HOSTED = "This server does not host this topic-partition."


def handle_describe_quorum(request: Any, ctx: RequestContext) -> Any:
    """The metadata quorum is this node alone: leader and only voter, no observers. Kafka answers
    any other topic-partition (or more than ``__cluster_metadata``-0) with UNKNOWN_TOPIC_OR_PARTITION
    on each partition asked. shareq keeps no metadata log: the high watermark and the voter's log
    end offset count the registry's changes written since the broker started."""
    broker = ctx.broker
    asked = [(t.topic_name, p.partition_index) for t in request.topics for p in t.partitions]
    success = ""  # v2's error messages are empty on success, as Kafka's
    if asked != [(METADATA_TOPIC, 0)]:
        topics = tuple(
            ctx.build(
                "TopicData",
                topic_name=t.topic_name,
                partitions=tuple(
                    ctx.build(
                        "PartitionData",
                        partition_index=p.partition_index,
                        error_code=ErrorCode.unknown_topic_or_partition,
                        error_message=_NOT_HOSTED,
                        leader_id=0,
                        leader_epoch=0,
                        high_watermark=0,
                        current_voters=(),
                        observers=(),
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
        )
        return ctx.build(error_code=ErrorCode.none, error_message=success, topics=topics, nodes=())
    offset = broker.topics.change_count
    now = int(time.time() * 1000)
    voter = ctx.build(
        "ReplicaState",
        replica_id=broker.node_id,
        replica_directory_id=directory_id(broker.topics.cluster_id, broker.data_dir),
        log_end_offset=offset,
        last_fetch_timestamp=now,
        last_caught_up_timestamp=now,
    )
    partition = ctx.build(
        "PartitionData",
        partition_index=0,
        error_code=ErrorCode.none,
        error_message=success,
        leader_id=broker.node_id,
        leader_epoch=QUORUM_EPOCH,
        high_watermark=offset,
        current_voters=(voter,),
        observers=(),
    )
    topic = ctx.build("TopicData", topic_name=METADATA_TOPIC, partitions=(partition,))
    nodes: tuple[Any, ...] = ()
    if ctx.version >= 2:  # the voters' endpoints (KIP-853): this broker's listeners
        listeners = tuple(
            ctx.build("Listener", name=lst.name, host=lst.host, port=lst.port) for lst in broker.listeners
        ) or (ctx.build("Listener", name="PLAINTEXT", host=broker.host, port=broker.port),)
        nodes = (ctx.build("Node", node_id=broker.node_id, listeners=listeners),)
    return ctx.build(error_code=ErrorCode.none, error_message=success, topics=(topic,), nodes=nodes)


def directory_id(cluster_id: str, data_dir: Path) -> uuid.UUID:
    """The log directory's id: stable for a data directory of a cluster (Kafka draws one at
    format time and keeps it in meta.properties)."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"shareq:{cluster_id}:{data_dir.resolve()}")


def handle_alter_replica_log_dirs(request: Any, ctx: RequestContext) -> Any:
    """Moving a replica to the log directory it is in is done at once (NONE); any other path is
    LOG_DIR_NOT_FOUND, a partition this broker does not have UNKNOWN_TOPIC_OR_PARTITION: what a
    one-node Kafka with one log dir answers."""
    broker = ctx.broker
    home = broker.data_dir.resolve()
    results: dict[str, list[Any]] = {}
    for wanted in request.dirs:
        path = Path(wanted.path)
        here = path.is_absolute() and path.resolve() == home
        for topic in wanted.topics:
            for index in topic.partitions:
                if broker.partition(topic.name, index) is None:
                    code = ErrorCode.unknown_topic_or_partition
                else:
                    code = ErrorCode.none if here else ErrorCode.log_dir_not_found
                results.setdefault(topic.name, []).append(
                    ctx.build("AlterReplicaLogDirPartitionResult", partition_index=index, error_code=code)
                )
    return ctx.build(
        throttle_time=NO_THROTTLE,
        results=tuple(
            ctx.build("AlterReplicaLogDirTopicResult", topic_name=name, partitions=tuple(parts))
            for name, parts in results.items()
        ),
    )


HANDLERS = {
    DESCRIBE_QUORUM: (VersionRange(0, 2), handle_describe_quorum),
    ALTER_REPLICA_LOG_DIRS: (VersionRange(1, 2), handle_alter_replica_log_dirs),
    DESCRIBE_LOG_DIRS: (VersionRange(1, 4), handle_describe_log_dirs),
    ELECT_LEADERS: (VersionRange(0, 2), handle_elect_leaders),
    ALTER_PARTITION_REASSIGNMENTS: (VersionRange(0, 0), handle_alter_partition_reassignments),
    LIST_PARTITION_REASSIGNMENTS: (VersionRange(0, 0), handle_list_partition_reassignments),
    DESCRIBE_CLUSTER: (VersionRange(0, 2), handle_describe_cluster),
}
