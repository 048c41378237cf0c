"""CreateTopics and DeleteTopics."""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.protocol import VersionRange
from shareq.protocol.api_keys import CREATE_TOPICS, DELETE_TOPICS
from shareq.topic_configs import InvalidConfigError, effective_topic_configs, validate_topic_configs

from ..config_synonyms import describe_topic_config
from ..context import NO_THROTTLE, RequestContext
from ..topics import InvalidTopicError, validate_topic_name
from .configs import config_layers

ZERO_UUID = uuid.UUID(int=0)
MAX_PARTITIONS = 10_000


def handle_create_topics(request: Any, ctx: RequestContext) -> Any:
    broker = ctx.broker
    validate_only = bool(getattr(request, "validate_only", False))
    results = []
    seen: set[str] = set()
    for wanted in request.topics:
        code, message = ErrorCode.none, None
        partitions = wanted.num_partitions if wanted.num_partitions != -1 else broker.config["num.partitions"]
        configs = {c.name: c.value for c in wanted.configs}
        topic_id = ZERO_UUID
        try:
            validate_topic_name(wanted.name)
            if wanted.name in seen:
                raise _Fail(ErrorCode.invalid_request, f"topic {wanted.name} listed twice")
            if wanted.name in broker.topics:
                raise _Fail(ErrorCode.topic_already_exists, f"Topic '{wanted.name}' already exists.")
            if wanted.assignments:
                partitions = _manual_partitions(wanted, broker.node_id)
            if partitions < 1 or partitions > MAX_PARTITIONS:
                raise _Fail(ErrorCode.invalid_partitions, f"invalid partition count {partitions}")
            if wanted.replication_factor not in (-1, 1):
                raise _Fail(
                    ErrorCode.invalid_replication_factor,
                    f"replication factor {wanted.replication_factor} exceeds the 1 broker available",
                )
            nulls = [name for name, value in configs.items() if value is None]
            if nulls:
                raise InvalidConfigError("Null value not supported for topic configs: " + ", ".join(nulls))
            broker.check_topic_configs(validate_topic_configs(configs))
            if not validate_only:
                topic_id = broker.create_topic(wanted.name, partitions, configs).topic_id
        except _Fail as fail:
            code, message = fail.code, str(fail)
        except InvalidTopicError as error:
            code, message = ErrorCode.invalid_topic_exception, str(error)
        except InvalidConfigError as error:
            code, message = ErrorCode.invalid_config, str(error)
        seen.add(wanted.name)
        result_configs: tuple[Any, ...] = ()
        if code is ErrorCode.none and ctx.version >= 5:
            overrides = {k: v for k, v in configs.items() if v is not None}
            layers = config_layers(broker)
            # The source is DescribeConfigs' (a cluster default such as min.insync.replicas=1
            # is DYNAMIC_DEFAULT_BROKER_CONFIG, as in Kafka).
            result_configs = tuple(
                ctx.build(
                    "CreatableTopicConfigs",
                    name=name,
                    value=value,
                    read_only=False,
                    config_source=int(describe_topic_config(name, value, overrides, layers).source),
                    is_sensitive=False,
                )
                for name, (value, _explicit) in effective_topic_configs(overrides, broker.config).items()
            )
        results.append(
            ctx.build(
                "CreatableTopicResult",
                name=wanted.name,
                topic_id=topic_id,
                error_code=code,
                error_message=message,
                topic_config_error_code=ErrorCode.none,
                num_partitions=partitions if code is ErrorCode.none else -1,
                replication_factor=1 if code is ErrorCode.none else -1,
                configs=result_configs,
            )
        )
    return ctx.build(throttle_time=NO_THROTTLE, topics=tuple(results))


def handle_delete_topics(request: Any, ctx: RequestContext) -> Any:
    broker = ctx.broker
    wanted: list[tuple[str | None, uuid.UUID]] = []
    if hasattr(request, "topic_names"):
        wanted = [(name, ZERO_UUID) for name in request.topic_names]
    else:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    results = []
    for name, topic_id in wanted:
        code, message = ErrorCode.none, None
        resolved = name
        if name is None:
            found = broker.topics.by_id(topic_id)
            resolved = found.name if found is not None else None
            if found is None:
                code = ErrorCode.unknown_topic_id
        if resolved is not None:
            topic = broker.topics.get(resolved)
            if topic is None:
                code = ErrorCode.unknown_topic_or_partition
            elif not broker.config["delete.topic.enable"]:  # Kafka's switch, off
                code = ErrorCode.topic_deletion_disabled
            else:
                topic_id = topic.topic_id
                broker.delete_topic(resolved)
        if code is not ErrorCode.none:
            message = code.name
        results.append(
            ctx.build(
                "DeletableTopicResult",
                name=resolved,
                topic_id=topic_id,
                error_code=code,
                error_message=message,
            )
        )
    return ctx.build(throttle_time=NO_THROTTLE, responses=tuple(results))


def _manual_partitions(wanted: Any, node_id: int) -> int:
    """The partition count of a manual replica assignment, which may name only this broker."""
    if wanted.num_partitions != -1 or wanted.replication_factor != -1:
        raise _Fail(
            ErrorCode.invalid_request,
            "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used "
            "at the same time.",
        )
    indexes = sorted(a.partition_index for a in wanted.assignments)
    if indexes != list(range(len(indexes))):
        raise _Fail(
            ErrorCode.invalid_replica_assignment, "Partitions must be numbered 0 to n-1 without gaps."
        )
    for assignment in wanted.assignments:
        if tuple(assignment.broker_ids) != (node_id,):
            raise _Fail(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes broker(s) that are not registered: only broker "
                f"{node_id} is.",
            )
    return len(indexes)


class _Fail(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


HANDLERS = {
    CREATE_TOPICS: (VersionRange(2, 7), handle_create_topics),
    DELETE_TOPICS: (VersionRange(1, 6), handle_delete_topics),
}
