"""``Admin``: topics, configs, offsets and share-group administration over our own connections.

Group calls go to the group's coordinator (FindCoordinator key_type 0); BROKER config calls go to that broker;
the rest go to any broker. Batch calls raise ``KafkaError`` for the first failing item unless told not to.
"""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.protocol.api_keys import (
    ALTER_CLIENT_QUOTAS,
    ALTER_SHARE_GROUP_OFFSETS,
    API_VERSIONS,
    CONSUMER_GROUP_DESCRIBE,
    CREATE_TOPICS,
    DELETE_GROUPS,
    DELETE_SHARE_GROUP_OFFSETS,
    DELETE_TOPICS,
    DESCRIBE_CLIENT_QUOTAS,
    DESCRIBE_CONFIGS,
    DESCRIBE_GROUPS,
    DESCRIBE_SHARE_GROUP_OFFSETS,
    DESCRIBE_TRANSACTIONS,
    INCREMENTAL_ALTER_CONFIGS,
    INIT_PRODUCER_ID,
    LIST_CONFIG_RESOURCES,
    LIST_GROUPS,
    LIST_TRANSACTIONS,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    SHARE_GROUP_DESCRIBE,
)
from shareq.security.acl import AclBinding, AclFilter, Operation, PatternType, Permission
from shareq.security.acl import ResourceType as AclResourceType
from shareq.security.scram import DEFAULT_ITERATIONS, ScramMechanism

from . import _admin_consumer as consumer
from . import _admin_security as security
from . import _admin_share as share
from . import _codec, _offsets, _partitions
from .admin_types import (
    AlterOp,
    ClientQuota,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ConfigSynonym,
    ConsumerGroupDescription,
    ConsumerGroupOffset,
    CreatedTopic,
    FeatureMetadata,
    GroupListing,
    NewTopic,
    OffsetInfo,
    OffsetSpec,
    QuotaFilter,
    ResourceType,
    ShareGroupDescription,
    ShareGroupOffset,
    TransactionDescription,
    TransactionListing,
)
from .cluster import COORDINATOR_ATTEMPTS, Cluster, TopicInfo
from .connection import BrokerConnection
from .errors import KafkaError, raise_for
from .security import ClientSecurity

MATCH_ALL_ACLS = AclFilter(
    AclResourceType.ANY, None, PatternType.ANY, None, None, Operation.ANY, Permission.ANY
)


class Admin:
    """``with Admin("host:port") as admin: admin.create_topic("t", 3)``."""

    def __init__(
        self,
        bootstrap: str | list[str],
        *,
        client_id: str = "shareq-admin",
        request_timeout: float = 30.0,
        security: ClientSecurity | None = None,
    ) -> None:
        self.cluster = Cluster(
            bootstrap, client_id=client_id, request_timeout=request_timeout, security=security
        )

    def close(self) -> None:
        self.cluster.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- topics ------------------------------------------------------------------------------------

    def create_topics(
        self,
        topics: Sequence[NewTopic | str],
        *,
        validate_only: bool = False,
        timeout: float = 30.0,
        raise_on_error: bool = True,
    ) -> dict[str, CreatedTopic]:
        conn = self.cluster.any_connection()
        _v, m = conn.module(CREATE_TOPICS)
        specs = [NewTopic(name=t) if isinstance(t, str) else t for t in topics]
        request = m.CreateTopicsRequest(
            topics=tuple(
                m.CreatableTopic(
                    name=t.name,
                    num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
                    assignments=(),
                    configs=tuple(m.CreatableTopicConfig(name=k, value=v) for k, v in t.configs.items()),
                )
                for t in specs
            ),
            timeout=datetime.timedelta(seconds=timeout),
            validate_only=validate_only,
        )
        response = conn.send(request, timeout=timeout + 5)
        out = {
            r.name: CreatedTopic(
                name=r.name,
                topic_id=getattr(r, "topic_id", None),
                num_partitions=int(getattr(r, "num_partitions", -1)),
                replication_factor=int(getattr(r, "replication_factor", -1)),
                error=r.error_code,
                error_message=r.error_message,
            )
            for r in response.topics
        }
        if raise_on_error:
            for r in out.values():
                raise_for(r.error, r.error_message, context=f"CreateTopics({r.name})")
        return out

    def create_topic(
        self,
        name: str,
        num_partitions: int = 1,
        replication_factor: int = 1,
        configs: Mapping[str, str] | None = None,
    ) -> uuid.UUID | None:
        """Create one topic; return its id."""
        spec = NewTopic(
            name=name,
            num_partitions=num_partitions,
            replication_factor=replication_factor,
            configs=configs or {},
        )
        return self.create_topics([spec])[name].topic_id

    def delete_topics(
        self, names: Sequence[str], *, timeout: float = 30.0, raise_on_error: bool = True
    ) -> dict[str, ErrorCode]:
        conn = self.cluster.any_connection()
        v, m = conn.module(DELETE_TOPICS)
        td = datetime.timedelta(seconds=timeout)
        if v >= 6:
            request = m.DeleteTopicsRequest(
                topics=tuple(m.DeleteTopicState(name=n, topic_id=None) for n in names), timeout=td
            )
        else:
            request = m.DeleteTopicsRequest(topic_names=tuple(names), timeout=td)
        response = conn.send(request, timeout=timeout + 5)
        out = {r.name: r.error_code for r in response.responses}
        for n in names:
            self.cluster.cache.topics.pop(n, None)
        if raise_on_error:
            share.first_error(out, "DeleteTopics")
        return out

    def list_topics(self, *, include_internal: bool = False) -> dict[str, TopicInfo]:
        cache = self.cluster.refresh_metadata(None)
        return {n: t for n, t in sorted(cache.topics.items()) if include_internal or not t.is_internal}

    def describe_topic(self, name: str) -> TopicInfo:
        return self.cluster.topic(name, refresh=True)

    def create_partitions(self, topic: str, total: int, *, validate_only: bool = False) -> None:
        """Grow ``topic`` to ``total`` partitions (CreatePartitions)."""
        _partitions.create_partitions(self.cluster, topic, total, validate_only=validate_only)

    def delete_records(self, topic: str, before: Mapping[int, int]) -> dict[int, int]:
        """Delete records below ``before[partition]`` (-1: all up to the high watermark); the new log
        start offset per partition (DeleteRecords)."""
        return _partitions.delete_records(self.cluster, topic, before)

    # -- features ----------------------------------------------------------------------------------

    def describe_features(self) -> FeatureMetadata:
        """Supported and finalized features, from ApiVersions at the highest version both speak (up to
        v4: v3 leaves out features whose minimum level is 0), as Kafka's ``Admin.describeFeatures``."""
        conn = self.cluster.any_connection()
        conn.connect()
        version = min(4, conn.broker_versions.get(API_VERSIONS, (0, 0))[1])
        if version < 3:
            return FeatureMetadata(supported={}, finalized={}, finalized_epoch=None)
        m = _codec.request_module(API_VERSIONS, version)
        response = conn.send(
            m.ApiVersionsRequest(client_software_name="shareq", client_software_version="0.1.0"),
            idempotent=True,
        )
        raise_for(response.error_code, None, context="ApiVersions")
        epoch = int(response.finalized_features_epoch)
        return FeatureMetadata(
            supported={f.name: (int(f.min_version), int(f.max_version)) for f in response.supported_features},
            finalized={
                f.name: (int(f.min_version_level), int(f.max_version_level))
                for f in response.finalized_features
            },
            finalized_epoch=epoch if epoch >= 0 else None,
        )

    # -- configs -----------------------------------------------------------------------------------

    def _config_connection(self, resource: ConfigResource) -> BrokerConnection:
        if resource.type is ResourceType.BROKER and resource.name:
            return self.cluster.connection(int(resource.name))
        return self.cluster.any_connection()

    def describe_configs(
        self,
        resources: Sequence[ConfigResource],
        *,
        keys: Sequence[str] | None = None,
        include_synonyms: bool = False,
    ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        """Configs of each resource. BROKER "<id>" is that broker's every config; BROKER "" only
        the cluster defaults set at runtime. ``include_synonyms`` names what each value falls back
        to, most specific first."""
        by_conn: dict[int, tuple[BrokerConnection, list[ConfigResource]]] = {}
        for r in resources:
            conn = self._config_connection(r)
            by_conn.setdefault(id(conn), (conn, []))[1].append(r)
        out: dict[ConfigResource, dict[str, ConfigEntry]] = {}
        for conn, items in by_conn.values():
            _v, m = conn.module(DESCRIBE_CONFIGS)
            request = m.DescribeConfigsRequest(
                resources=tuple(
                    m.DescribeConfigsResource(
                        resource_type=int(r.type),
                        resource_name=r.name,
                        configuration_keys=None if keys is None else tuple(keys),
                    )
                    for r in items
                ),
                include_synonyms=include_synonyms,
            )
            response = conn.send(request, idempotent=True)
            for res in response.results:
                key = ConfigResource(ResourceType(int(res.resource_type)), res.resource_name)
                raise_for(
                    res.error_code, res.error_message, context=f"DescribeConfigs({key.type.name} {key.name})"
                )
                entries = {}
                for c in res.configs:
                    source = _config_source(int(c.config_source))
                    entries[c.name] = ConfigEntry(
                        name=c.name,
                        value=c.value,
                        source=source,
                        read_only=bool(c.read_only),
                        is_sensitive=bool(c.is_sensitive),
                        is_default=source is ConfigSource.DEFAULT_CONFIG,
                        synonyms=tuple(
                            ConfigSynonym(y.name, y.value, _config_source(int(y.source)))
                            for y in getattr(c, "synonyms", ())
                        ),
                    )
                out[key] = entries
        return out

    def list_config_resources(self, types: Sequence[ResourceType] = ()) -> list[ConfigResource]:
        """The resources that have configs (ListConfigResources v1): groups with overrides, brokers,
        topics; ``types`` narrows it (empty: every type the broker lists)."""
        conn = self.cluster.any_connection()
        _v, m = conn.module(LIST_CONFIG_RESOURCES)
        response = conn.send(
            m.ListConfigResourcesRequest(resource_types=tuple(int(t) for t in types)), idempotent=True
        )
        raise_for(response.error_code, None, context="ListConfigResources")
        out = []
        for r in response.config_resources:
            try:
                kind = ResourceType(int(r.resource_type))
            except ValueError:
                continue  # a type this client does not model (client metrics, broker loggers)
            out.append(ConfigResource(kind, r.resource_name))
        return out

    def alter_configs(
        self,
        resource: ConfigResource,
        changes: Mapping[str, str | None],
        *,
        ops: Mapping[str, AlterOp] | None = None,
        validate_only: bool = False,
    ) -> None:
        """IncrementalAlterConfigs: SET each name to its value, DELETE the names mapped to None
        (``ops`` can ask APPEND/SUBTRACT for list-valued configs)."""
        conn = self._config_connection(resource)
        _v, m = conn.module(INCREMENTAL_ALTER_CONFIGS)
        configs = tuple(
            m.AlterableConfig(
                name=name,
                config_operation=int((ops or {}).get(name, AlterOp.DELETE if value is None else AlterOp.SET)),
                value=value,
            )
            for name, value in changes.items()
        )
        request = m.IncrementalAlterConfigsRequest(
            resources=(
                m.AlterConfigsResource(
                    resource_type=int(resource.type), resource_name=resource.name, configs=configs
                ),
            ),
            validate_only=validate_only,
        )
        response = conn.send(request)
        for r in response.responses:
            raise_for(r.error_code, r.error_message, context=f"IncrementalAlterConfigs({resource.name})")

    # -- client quotas -----------------------------------------------------------------------------

    def describe_client_quotas(
        self, components: Sequence[QuotaFilter] = (), *, strict: bool = False
    ) -> list[ClientQuota]:
        """Quotas of the entities matching every component (``strict``: and no other entity type)."""
        conn = self.cluster.any_connection()
        _v, m = conn.module(DESCRIBE_CLIENT_QUOTAS)
        request = m.DescribeClientQuotasRequest(
            components=tuple(
                m.ComponentData(entity_type=c.entity_type, match_type=int(c.match_type), match=c.match)
                for c in components
            ),
            strict=strict,
        )
        response = conn.send(request, idempotent=True)
        raise_for(response.error_code, response.error_message, context="DescribeClientQuotas")
        return [
            ClientQuota(
                entity={e.entity_type: e.entity_name for e in entry.entity},
                values={v.key: float(v.value) for v in entry.values},
            )
            for entry in response.entries or ()
        ]

    def alter_client_quotas(
        self,
        alterations: Sequence[ClientQuota | tuple[Mapping[str, str | None], Mapping[str, float | None]]],
        *,
        validate_only: bool = False,
        raise_on_error: bool = True,
    ) -> list[ErrorCode]:
        """Set quota values per entity; a value of None removes that key. One error code per
        alteration, in order."""
        conn = self.cluster.any_connection()
        _v, m = conn.module(ALTER_CLIENT_QUOTAS)
        pairs = [(a.entity, a.values) if isinstance(a, ClientQuota) else a for a in alterations]
        request = m.AlterClientQuotasRequest(
            entries=tuple(
                m.EntryData(
                    entity=tuple(m.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()),
                    ops=tuple(
                        m.OpData(key=k, value=0.0 if v is None else float(v), remove=v is None)
                        for k, v in values.items()
                    ),
                )
                for entity, values in pairs
            ),
            validate_only=validate_only,
        )
        response = conn.send(request)
        codes = [r.error_code for r in response.entries]
        if raise_on_error:
            for r in response.entries:
                raise_for(r.error_code, r.error_message, context="AlterClientQuotas")
        return codes

    # -- offsets -----------------------------------------------------------------------------------

    def list_offsets(
        self,
        topic: str,
        partitions: Sequence[int] | None = None,
        spec: OffsetSpec | int = OffsetSpec.LATEST,
        *,
        isolation_level: int = 0,
    ) -> dict[int, OffsetInfo]:
        """Offsets of ``topic``'s partitions: LATEST (the high watermark), EARLIEST, MAX_TIMESTAMP, or the
        first offset at or after a timestamp in ms."""
        return _offsets.list_offsets(self.cluster, topic, partitions, spec, isolation_level=isolation_level)

    # -- groups ------------------------------------------------------------------------------------

    def list_groups(self, *, types: Sequence[str] = (), states: Sequence[str] = ()) -> list[GroupListing]:
        """Groups on every broker (ListGroups v5 reports each group's type: classic, consumer, share...)."""
        self.cluster.refresh_metadata(())
        out: dict[str, GroupListing] = {}
        for node_id in sorted(self.cluster.cache.brokers):
            conn = self.cluster.connection(node_id)
            v, m = conn.module(LIST_GROUPS)
            response = conn.send(share.build_list_groups(m, v, types=types, states=states), idempotent=True)
            for g in share.parse_list_groups(response):
                out[g.group_id] = g
        return [out[k] for k in sorted(out)]

    def describe_share_group(self, group_id: str) -> ShareGroupDescription:
        result = self.describe_share_groups([group_id])[group_id]
        result.raise_for_error()
        return result

    def describe_share_groups(self, group_ids: Sequence[str]) -> dict[str, ShareGroupDescription]:
        out: dict[str, ShareGroupDescription] = {}
        for gid in group_ids:
            response = self._coordinator_call(
                gid, SHARE_GROUP_DESCRIBE, lambda m, gid=gid: share.build_share_group_describe(m, [gid])
            )
            out.update(share.parse_share_group_describe(response))
        return out

    def delete_groups(self, group_ids: Sequence[str], *, raise_on_error: bool = True) -> dict[str, ErrorCode]:
        out: dict[str, ErrorCode] = {}
        for gid in group_ids:
            response = self._coordinator_call(
                gid, DELETE_GROUPS, lambda m, gid=gid: m.DeleteGroupsRequest(groups_names=(gid,))
            )
            out.update({r.group_id: r.error_code for r in response.results})
        if raise_on_error:
            share.first_error(out, "DeleteGroups")
        return out

    def describe_share_group_offsets(
        self, group_id: str, topics: Mapping[str, Sequence[int]] | None = None
    ) -> dict[tuple[str, int], ShareGroupOffset]:
        """Start offsets (and lag, from v1) per (topic, partition); ``topics=None`` asks for all of them."""
        response = self._coordinator_call(
            group_id,
            DESCRIBE_SHARE_GROUP_OFFSETS,
            lambda m: share.build_describe_share_group_offsets(m, group_id, topics),
        )
        return share.parse_describe_share_group_offsets(response, group_id)

    def alter_share_group_offsets(
        self, group_id: str, offsets: Mapping[tuple[str, int], int], *, raise_on_error: bool = True
    ) -> dict[tuple[str, int], ErrorCode]:
        """Set the start offset of share-partitions (the group must be empty)."""
        response = self._coordinator_call(
            group_id,
            ALTER_SHARE_GROUP_OFFSETS,
            lambda m: share.build_alter_share_group_offsets(m, group_id, offsets),
        )
        out = share.parse_alter_share_group_offsets(response, group_id)
        if raise_on_error:
            share.first_error(out, f"AlterShareGroupOffsets({group_id})")
        return out

    def delete_share_group_offsets(
        self, group_id: str, topics: Sequence[str], *, raise_on_error: bool = True
    ) -> dict[str, ErrorCode]:
        response = self._coordinator_call(
            group_id,
            DELETE_SHARE_GROUP_OFFSETS,
            lambda m: share.build_delete_share_group_offsets(m, group_id, topics),
        )
        out = share.parse_delete_share_group_offsets(response, group_id)
        if raise_on_error:
            share.first_error(out, f"DeleteShareGroupOffsets({group_id})")
        return out

    # -- consumer groups ---------------------------------------------------------------------------

    def describe_consumer_group(self, group_id: str) -> ConsumerGroupDescription:
        """A consumer group of either protocol: KIP-848 (ConsumerGroupDescribe) when the group is
        one, else classic (DescribeGroups); GROUP_ID_NOT_FOUND when neither knows it."""
        response = self._coordinator_call(
            group_id,
            CONSUMER_GROUP_DESCRIBE,
            lambda m: m.ConsumerGroupDescribeRequest(
                group_ids=(group_id,), include_authorized_operations=False
            ),
        )
        (g,) = response.groups
        if g.error_code != ErrorCode.group_id_not_found:
            return consumer.parse_consumer_group_describe(response)
        response = self._coordinator_call(
            group_id,
            DESCRIBE_GROUPS,
            lambda m: m.DescribeGroupsRequest(groups=(group_id,), include_authorized_operations=False),
        )
        (g,) = response.groups
        if g.group_state == "Dead" and g.error_code == ErrorCode.none:
            raise KafkaError(ErrorCode.group_id_not_found, None, context=f"group {group_id}")
        return consumer.parse_describe_groups(response)

    def list_consumer_group_offsets(
        self, group_id: str, topics: Mapping[str, Sequence[int]] | None = None
    ) -> dict[tuple[str, int], ConsumerGroupOffset]:
        """Committed offsets per (topic, partition); ``topics=None`` asks for all of them. Waits out
        offsets held by an open transaction (UNSTABLE_OFFSET_COMMIT) as Kafka's admin client does."""
        backoff = 0.05
        deadline = time.monotonic() + self.cluster.request_timeout
        while True:
            response = self._coordinator_call(
                group_id, OFFSET_FETCH, lambda m: consumer.build_offset_fetch(m, group_id, topics)
            )
            try:
                return consumer.parse_offset_fetch(response, group_id)
            except KafkaError as error:
                if error.code != ErrorCode.unstable_offset_commit or time.monotonic() > deadline:
                    raise
            time.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    def alter_consumer_group_offsets(
        self, group_id: str, offsets: Mapping[tuple[str, int], int], *, raise_on_error: bool = True
    ) -> dict[tuple[str, int], ErrorCode]:
        """Commit ``offsets`` for the group (it must have no members)."""
        response = self._coordinator_call(
            group_id, OFFSET_COMMIT, lambda m: consumer.build_offset_commit(m, group_id, offsets)
        )
        out = consumer.parse_partition_errors(response)
        if raise_on_error:
            share.first_error(out, f"OffsetCommit({group_id})")
        return out

    def delete_consumer_group_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]], *, raise_on_error: bool = True
    ) -> dict[tuple[str, int], ErrorCode]:
        """Delete committed offsets (refused per partition while the group consumes its topic)."""
        response = self._coordinator_call(
            group_id, OFFSET_DELETE, lambda m: consumer.build_offset_delete(m, group_id, partitions)
        )
        out = consumer.parse_partition_errors(response)
        if raise_on_error:
            share.first_error(out, f"OffsetDelete({group_id})")
        return out

    # -- transactions ------------------------------------------------------------------------------

    def list_transactions(
        self, *, states: Sequence[str] = (), pattern: str | None = None
    ) -> list[TransactionListing]:
        """Transactional ids the coordinator knows (ListTransactions), optionally by state or regex."""
        conn = self.cluster.any_connection()
        v, m = conn.module(LIST_TRANSACTIONS)
        fields: dict[str, Any] = {"state_filters": tuple(states), "producer_id_filters": ()}
        if v >= 2:
            fields["transactional_id_pattern"] = pattern
        response = conn.send(m.ListTransactionsRequest(**fields), idempotent=True)
        raise_for(response.error_code, None, context="ListTransactions")
        rows = [
            TransactionListing(
                transactional_id=t.transactional_id, producer_id=t.producer_id, state=t.transaction_state
            )
            for t in response.transaction_states
        ]
        return sorted(rows, key=lambda r: r.transactional_id)

    def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        """One transactional id's state, producer, timeout and partitions (DescribeTransactions)."""
        conn = self.cluster.any_connection()
        _v, m = conn.module(DESCRIBE_TRANSACTIONS)
        response = conn.send(
            m.DescribeTransactionsRequest(transactional_ids=(transactional_id,)), idempotent=True
        )
        t = response.transaction_states[0]
        raise_for(t.error_code, None, context=f"DescribeTransactions({transactional_id})")
        return TransactionDescription(
            transactional_id=t.transactional_id,
            state=t.transaction_state,
            producer_id=t.producer_id,
            producer_epoch=t.producer_epoch,
            timeout_ms=int(t.transaction_timeout.total_seconds() * 1000),
            start_ms=round(t.transaction_start_time.timestamp() * 1000)
            if t.transaction_state == "Ongoing"
            else -1,
            partitions=tuple((d.topic, p) for d in t.topics for p in d.partitions),
        )

    def abort_transaction(self, transactional_id: str, timeout_ms: int) -> tuple[int, int]:
        """Abort the open transaction of ``transactional_id`` the way a new producer instance
        does: InitProducerId fences the current producer (epoch bump) and aborts what it left
        open. Returns the new (producer id, epoch)."""
        conn = self.cluster.any_connection()
        _v, m = conn.module(INIT_PRODUCER_ID)
        request = m.InitProducerIdRequest(
            transactional_id=transactional_id, transaction_timeout=datetime.timedelta(milliseconds=timeout_ms)
        )
        for _ in range(COORDINATOR_ATTEMPTS):
            response = conn.send(request)
            if response.error_code is not ErrorCode.concurrent_transactions:
                break
            time.sleep(0.1)
        raise_for(response.error_code, None, context=f"InitProducerId({transactional_id})")
        return response.producer_id, response.producer_epoch

    # -- ACLs and SCRAM credentials -----------------------------------------------------------------

    def create_acls(self, bindings: Sequence[AclBinding]) -> None:
        """Add ACL bindings (raises ``KafkaError`` with the first refusal, e.g. SECURITY_DISABLED)."""
        security.create_acls(self.cluster.any_connection(), bindings)

    def describe_acls(self, acl_filter: AclFilter | None = None) -> list[AclBinding]:
        return security.describe_acls(self.cluster.any_connection(), acl_filter or MATCH_ALL_ACLS)

    def delete_acls(self, filters: Sequence[AclFilter]) -> list[AclBinding]:
        """Remove the bindings each filter matches; returns them."""
        return security.delete_acls(self.cluster.any_connection(), filters)

    def upsert_scram_credential(
        self,
        user: str,
        password: str,
        mechanism: ScramMechanism = ScramMechanism.SCRAM_SHA_512,
        iterations: int = DEFAULT_ITERATIONS,
    ) -> None:
        security.upsert_scram_credential(self.cluster.any_connection(), user, password, mechanism, iterations)

    def delete_scram_credential(self, user: str, mechanism: ScramMechanism) -> None:
        security.delete_scram_credential(self.cluster.any_connection(), user, mechanism)

    def describe_scram_credentials(
        self, users: Sequence[str] | None = None
    ) -> dict[str, list[tuple[ScramMechanism, int]]]:
        return security.describe_scram_credentials(self.cluster.any_connection(), users)

    def _coordinator_call(self, group_id: str, api_key: int, build: Any) -> Any:
        return self.cluster.coordinator_call(group_id, api_key, build)


def _config_source(value: int) -> ConfigSource:
    try:
        return ConfigSource(value)
    except ValueError:
        return ConfigSource.UNKNOWN


__all__ = ["Admin", "KafkaError"]
