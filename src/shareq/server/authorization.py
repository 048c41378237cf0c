"""ACL checks around the handlers, installed only when ``authorizer.class.name`` is set.

``install`` wraps each registered handler with the checks Kafka's ``KafkaApis`` makes for that
api: whole-request checks (the group of a JoinGroup, the transactional id of an EndTxn, the
cluster for CreateAcls) answer the api's *_AUTHORIZATION_FAILED code without running the
handler; per-resource checks (the topics of a Produce, the groups of a DescribeGroups) let the
handler serve the allowed resources and answer the others with the code, in place. To do that
without a response builder per api, a denied resource's name (or topic id) is swapped for a
placeholder the handler cannot resolve (an illegal name, an unknown id), so it does nothing for
it, and the response entity carrying the placeholder gets the name back and the code.

Authorized operations in Metadata and the describe APIs are recomputed for the principal.
A broker without an authorizer never sees this module: its handler table is left as it was.
"""

from __future__ import annotations

import dataclasses
import inspect
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.protocol import DirectResponse
from shareq.protocol import api_keys as api
from shareq.protocol.blank import blank
from shareq.security.acl import CLUSTER_NAME, Authorizer, Operation, ResourceType

from .acl_operations import UNKNOWN_AUTHORIZED_OPERATIONS
from .context import NO_THROTTLE, RequestContext
from .handlers import HandlerTable

T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
TOPIC_DENIED = ErrorCode.topic_authorization_failed
GROUP_DENIED = ErrorCode.group_authorization_failed
CLUSTER_DENIED = ErrorCode.cluster_authorization_failed
TXN_DENIED = ErrorCode.transactional_id_authorization_failed
ZERO_UUID = uuid.UUID(int=0)
_TOPIC_KEYS = ("name", "topic", "topic_name", "topic_id")


class Gate:
    """One request's checks: decisions, the placeholders handed to the handler, the response fix-up."""

    def __init__(self, ctx: RequestContext, authorizer: Authorizer) -> None:
        self.ctx = ctx
        self.authorizer = authorizer
        self.host = ctx.session.client_host
        self._placeholders: dict[Any, tuple[Any, ErrorCode]] = {}
        self.filters: list[tuple[str, ResourceType, Operation]] = []
        self.wants_operations = False
        """The request asked for authorized operations (group describes leave the field unset)."""

    def allowed(self, resource: ResourceType, operation: Operation, name: str) -> bool:
        return self.authorizer.authorize(self.ctx.principal, self.host, operation, resource, name)

    # -- per-resource denial -------------------------------------------------------------------

    def _placeholder(self, original: Any, code: ErrorCode) -> Any:
        n = len(self._placeholders) + 1
        fake: Any = uuid.UUID(int=n) if isinstance(original, uuid.UUID) else f"\x00denied\x00{n}"
        self._placeholders[fake] = (original, code)
        return fake

    def _topic_name(self, value: Any) -> str | None:
        if isinstance(value, uuid.UUID):
            topic = self.ctx.broker.topics.by_id(value)
            return None if topic is None else topic.name
        return str(value) if value else None

    def items(
        self,
        entity: Any,
        path: tuple[str, ...],
        decide: Callable[[Any, Any], ErrorCode | None],
        keys: tuple[str, ...] | None = _TOPIC_KEYS,
    ) -> Any:
        """``entity`` with the items at ``path`` that ``decide(item, key)`` refuses swapped for
        placeholders. ``keys``: the item's naming attribute candidates (``None``: items are names)."""
        if entity is None:
            return None
        head, rest = path[0], path[1:]
        value = getattr(entity, head)
        if value is None:
            return entity
        if rest:
            new = tuple(self.items(item, rest, decide, keys) for item in value)
        else:
            new = tuple(self._item(item, decide, keys) for item in value)
        return dataclasses.replace(entity, **{head: new})

    def _item(
        self, item: Any, decide: Callable[[Any, Any], ErrorCode | None], keys: tuple[str, ...] | None
    ) -> Any:
        if keys is None:
            code = decide(item, item)
            return item if code is None else self._placeholder(item, code)
        for key in keys:
            value = getattr(item, key, None)
            if value is None or value == "" or value == ZERO_UUID:
                continue
            code = decide(item, value)
            if code is None:
                return item
            return dataclasses.replace(item, **{key: self._placeholder(value, code)})
        return item

    def topics(
        self, request: Any, path: tuple[str, ...], operation: Operation, code: ErrorCode = TOPIC_DENIED
    ) -> Any:
        def decide(_item: Any, value: Any) -> ErrorCode | None:
            name = self._topic_name(value)
            if name is None:
                return None  # unknown id: the handler answers UNKNOWN_TOPIC_ID
            return None if self.allowed(T, operation, name) else code

        return self.items(request, path, decide)

    def all_topics(self, request: Any, path: tuple[str, ...], code: ErrorCode) -> Any:
        """Every topic of ``path`` refused with ``code`` (a transactional id the principal may not use)."""
        return self.items(request, path, lambda _i, _v: code)

    def names(
        self,
        request: Any,
        path: tuple[str, ...],
        resource: ResourceType,
        operation: Operation,
        code: ErrorCode,
    ) -> Any:
        """Items that are plain names (group ids, transactional ids)."""
        return self.items(
            request, path, lambda _i, v: None if self.allowed(resource, operation, v) else code, keys=None
        )

    # -- response --------------------------------------------------------------------------------

    def finish(self, response: Any) -> Any:
        if response is None:
            return None
        if isinstance(response, DirectResponse):  # filtered as its kio entity
            response = response.entity()
        return self._fix(response, None)

    def _fix(self, entity: Any, code: ErrorCode | None) -> Any:
        if not dataclasses.is_dataclass(entity) or isinstance(entity, type):
            return entity
        changes: dict[str, Any] = {}
        for field in dataclasses.fields(entity):
            value = getattr(entity, field.name)
            if self._placeholders and isinstance(value, str | uuid.UUID) and value in self._placeholders:
                original, code = self._placeholders[value]
                changes[field.name] = original
        for field in dataclasses.fields(entity):
            name = field.name
            value = changes.get(name, getattr(entity, name))
            if name == "error_code" and code is not None:
                changes[name] = code
            elif name == "error_message" and code is not None:
                changes[name] = None
            elif name.endswith("authorized_operations") and isinstance(value, int):
                if value != UNKNOWN_AUTHORIZED_OPERATIONS or (
                    self.wants_operations and name == "authorized_operations"
                ):
                    changes[name] = self._operations(entity, name)
            elif isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
                kept = tuple(self._fix(item, code) for item in value if self._visible(name, item))
                if kept != value:
                    changes[name] = kept
            elif dataclasses.is_dataclass(value) and not isinstance(value, type):
                fixed = self._fix(value, code)
                if fixed is not value:
                    changes[name] = fixed
        return dataclasses.replace(entity, **changes) if changes else entity

    def _visible(self, field_name: str, item: Any) -> bool:
        for path_field, resource, operation in self.filters:
            if path_field == field_name:
                keys = ("name", "topic", "topic_name") if resource is T else ("group_id", "transactional_id")
                name = next((getattr(item, k) for k in keys if isinstance(getattr(item, k, None), str)), None)
                if name in self._placeholders:
                    return True  # a refused resource the request named: answered with its code
                if isinstance(name, str) and not self.allowed(resource, operation, name):
                    return False
        return True

    def _operations(self, entity: Any, field_name: str) -> int:
        if field_name == "cluster_authorized_operations":
            return self.authorizer.authorized_operations(self.ctx.principal, self.host, C, CLUSTER_NAME)
        group = getattr(entity, "group_id", None)
        if isinstance(group, str):
            return self.authorizer.authorized_operations(self.ctx.principal, self.host, G, group)
        name = getattr(entity, "name", None)
        if isinstance(name, str):
            return self.authorizer.authorized_operations(self.ctx.principal, self.host, T, name)
        return UNKNOWN_AUTHORIZED_OPERATIONS


class Denied(Exception):
    """The whole request is refused with ``code`` (raised by a rule, answered by the wrapper)."""

    def __init__(self, code: ErrorCode) -> None:
        self.code = code


Rule = Callable[[Any, Gate], Any]
"""Checks one request: returns the request to hand to the handler (placeholders swapped in), or
raises ``Denied``."""


def _require(
    gate: Gate, resource: ResourceType, operation: Operation, name: str | None, code: ErrorCode
) -> None:
    if name is not None and not gate.allowed(resource, operation, name):
        raise Denied(code)


def _cluster(operation: Operation) -> Rule:
    def rule(request: Any, gate: Gate) -> Any:
        _require(gate, C, operation, CLUSTER_NAME, CLUSTER_DENIED)
        return request

    return rule


def _group(operation: Operation, then: Rule | None = None) -> Rule:
    def rule(request: Any, gate: Gate) -> Any:
        _require(gate, G, operation, request.group_id, GROUP_DENIED)
        return request if then is None else then(request, gate)

    return rule


def _topics(path: tuple[str, ...], operation: Operation) -> Rule:
    return lambda request, gate: gate.topics(request, path, operation)


def _subscribed(field: str) -> Rule:
    """KIP-848 and share heartbeats: DESCRIBE on each subscribed topic, else the whole request fails."""

    def rule(request: Any, gate: Gate) -> Any:
        for name in getattr(request, field, None) or ():
            _require(gate, T, Operation.DESCRIBE, name, TOPIC_DENIED)
        return request

    return rule


def _produce(request: Any, gate: Gate) -> Any:
    txn = request.transactional_id
    if txn and not gate.allowed(X, Operation.WRITE, txn):
        return gate.all_topics(request, ("topic_data",), TXN_DENIED)
    return gate.topics(request, ("topic_data",), Operation.WRITE)


def _metadata(request: Any, gate: Gate) -> Any:
    if request.topics is None:
        gate.filters.append(("topics", T, Operation.DESCRIBE))
        return request
    broker = gate.ctx.broker
    may_create = (
        bool(getattr(request, "allow_auto_topic_creation", True))
        and broker.config["auto.create.topics.enable"]
    )
    cluster_create = may_create and gate.allowed(C, Operation.CREATE, CLUSTER_NAME)

    def decide(_item: Any, value: Any) -> ErrorCode | None:
        name = gate._topic_name(value)
        if name is None:
            return None
        if not gate.allowed(T, Operation.DESCRIBE, name):
            return TOPIC_DENIED
        if (
            name not in broker.topics
            and may_create
            and not (cluster_create or gate.allowed(T, Operation.CREATE, name))
        ):
            return TOPIC_DENIED
        return None

    return gate.items(request, ("topics",), decide)


def _offset_fetch(request: Any, gate: Gate) -> Any:
    gate.filters.append(("topics", T, Operation.DESCRIBE))  # "all topics" answers only describable ones
    if getattr(request, "groups", None) is not None and hasattr(request, "groups"):
        for group in request.groups:
            _require(gate, G, Operation.DESCRIBE, group.group_id, GROUP_DENIED)
        return gate.topics(request, ("groups", "topics"), Operation.DESCRIBE)
    _require(gate, G, Operation.DESCRIBE, request.group_id, GROUP_DENIED)
    return gate.topics(request, ("topics",), Operation.DESCRIBE)


def _find_coordinator(request: Any, gate: Gate) -> Any:
    key_type = int(getattr(request, "key_type", 0))
    resource, operation, code = {
        0: (G, Operation.DESCRIBE, GROUP_DENIED),
        1: (X, Operation.DESCRIBE, TXN_DENIED),
    }.get(key_type, (C, Operation.CLUSTER_ACTION, CLUSTER_DENIED))
    name_of = (lambda _k: CLUSTER_NAME) if resource is C else (lambda k: k)
    if hasattr(request, "coordinator_keys") and request.coordinator_keys:
        return gate.items(
            request,
            ("coordinator_keys",),
            lambda _i, k: None if gate.allowed(resource, operation, name_of(k)) else code,
            keys=None,
        )
    _require(gate, resource, operation, name_of(getattr(request, "key", "")), code)
    return request


def _init_producer_id(request: Any, gate: Gate) -> Any:
    txn = request.transactional_id
    if txn:
        _require(gate, X, Operation.WRITE, txn, TXN_DENIED)
        return request
    if gate.allowed(C, Operation.IDEMPOTENT_WRITE, CLUSTER_NAME):
        return request
    # Kafka 3+: WRITE on any topic is enough for an idempotent producer
    if any(gate.allowed(T, Operation.WRITE, topic.name) for topic in gate.ctx.broker.topics):
        return request
    raise Denied(CLUSTER_DENIED)


def _txn(then: Rule | None = None, field: str = "transactional_id") -> Rule:
    def rule(request: Any, gate: Gate) -> Any:
        _require(gate, X, Operation.WRITE, getattr(request, field, None) or None, TXN_DENIED)
        return request if then is None else then(request, gate)

    return rule


def _add_partitions_to_txn(request: Any, gate: Gate) -> Any:
    if hasattr(request, "transactions"):  # v4+: the brokers' batched form
        _require(gate, C, Operation.CLUSTER_ACTION, CLUSTER_NAME, CLUSTER_DENIED)
        return request
    txn = getattr(request, "v3_and_below_transactional_id", None) or getattr(
        request, "transactional_id", None
    )
    path = ("v3_and_below_topics",) if hasattr(request, "v3_and_below_topics") else ("topics",)
    if txn and not gate.allowed(X, Operation.WRITE, txn):
        return gate.all_topics(request, path, TXN_DENIED)
    return gate.topics(request, path, Operation.WRITE)


_CONFIG_RESOURCES = {2: T, 4: C, 32: G}  # ConfigResource types: TOPIC, BROKER, GROUP


def _configs(operation: Operation) -> Rule:
    def rule(request: Any, gate: Gate) -> Any:
        def decide(item: Any, name: Any) -> ErrorCode | None:
            resource = _CONFIG_RESOURCES.get(int(item.resource_type))
            if resource is None:
                return None
            code = {T: TOPIC_DENIED, C: CLUSTER_DENIED, G: GROUP_DENIED}[resource]
            target = CLUSTER_NAME if resource is C else name
            return None if gate.allowed(resource, operation, target) else code

        return gate.items(request, ("resources",), decide, keys=("resource_name",))

    return rule


def _delete_topics(request: Any, gate: Gate) -> Any:
    if hasattr(request, "topic_names"):
        return gate.names(request, ("topic_names",), T, Operation.DELETE, TOPIC_DENIED)
    return gate.topics(request, ("topics",), Operation.DELETE)


def _create_topics(request: Any, gate: Gate) -> Any:
    if gate.allowed(C, Operation.CREATE, CLUSTER_NAME):
        return request
    return gate.topics(request, ("topics",), Operation.CREATE)


def _list_filter(field: str, resource: ResourceType) -> Rule:
    def rule(request: Any, gate: Gate) -> Any:
        if not gate.allowed(C, Operation.DESCRIBE, CLUSTER_NAME):
            gate.filters.append((field, resource, Operation.DESCRIBE))
        return request

    return rule


def _share_offsets(request: Any, gate: Gate) -> Any:
    gate.filters.append(("topics", T, Operation.DESCRIBE))
    for group in request.groups:
        _require(gate, G, Operation.DESCRIBE, group.group_id, GROUP_DENIED)
    return gate.topics(request, ("groups", "topics"), Operation.DESCRIBE)


def _per_item_cluster(operation: Operation, results: Callable[[Any, RequestContext, ErrorCode], Any]) -> Rule:
    """Cluster-level checks of APIs that answer one result per item (CreateAcls, DeleteAcls,
    AlterUserScramCredentials): the denial is built by ``results``."""

    def rule(request: Any, gate: Gate) -> Any:
        if not gate.allowed(C, operation, CLUSTER_NAME):
            raise _Answer(results(request, gate.ctx, CLUSTER_DENIED))
        return request

    return rule


class _Answer(Exception):
    def __init__(self, response: Any) -> None:
        self.response = response


def _acl_creations(request: Any, ctx: RequestContext, code: ErrorCode) -> Any:
    return ctx.build(
        throttle_time=NO_THROTTLE,
        results=tuple(
            ctx.build("AclCreationResult", error_code=code, error_message=None) for _ in request.creations
        ),
    )


def _acl_deletions(request: Any, ctx: RequestContext, code: ErrorCode) -> Any:
    return ctx.build(
        throttle_time=NO_THROTTLE,
        filter_results=tuple(
            ctx.build("DeleteAclsFilterResult", error_code=code, error_message=None, matching_acls=())
            for _ in request.filters
        ),
    )


def _scram_alterations(request: Any, ctx: RequestContext, code: ErrorCode) -> Any:
    users = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
    return ctx.build(
        throttle_time=NO_THROTTLE,
        results=tuple(
            ctx.build("AlterUserScramCredentialsResult", user=u, error_code=code, error_message=None)
            for u in users
        ),
    )


R, W, D = Operation.READ, Operation.WRITE, Operation.DESCRIBE

RULES: dict[int, Rule] = {
    api.PRODUCE: _produce,
    api.FETCH: _topics(("topics",), R),
    api.LIST_OFFSETS: _topics(("topics",), D),
    api.METADATA: _metadata,
    api.OFFSET_COMMIT: _group(R, _topics(("topics",), R)),
    api.OFFSET_FETCH: _offset_fetch,
    api.FIND_COORDINATOR: _find_coordinator,
    api.JOIN_GROUP: _group(R),
    api.HEARTBEAT: _group(R),
    api.LEAVE_GROUP: _group(R),
    api.SYNC_GROUP: _group(R),
    api.DESCRIBE_GROUPS: lambda q, g: g.names(q, ("groups",), G, D, GROUP_DENIED),
    api.LIST_GROUPS: _list_filter("groups", G),
    api.SASL_HANDSHAKE: lambda q, g: q,
    api.API_VERSIONS: lambda q, g: q,
    api.CREATE_TOPICS: _create_topics,
    api.DELETE_TOPICS: _delete_topics,
    api.DELETE_RECORDS: _topics(("topics",), Operation.DELETE),
    api.INIT_PRODUCER_ID: _init_producer_id,
    api.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
    api.ADD_OFFSETS_TO_TXN: _txn(_group(R)),
    api.END_TXN: _txn(),
    api.TXN_OFFSET_COMMIT: _txn(_group(R, _topics(("topics",), R))),
    api.DESCRIBE_ACLS: _cluster(D),
    api.CREATE_ACLS: _per_item_cluster(Operation.ALTER, _acl_creations),
    api.DELETE_ACLS: _per_item_cluster(Operation.ALTER, _acl_deletions),
    api.DESCRIBE_CONFIGS: _configs(Operation.DESCRIBE_CONFIGS),
    api.ALTER_CONFIGS: _configs(Operation.ALTER_CONFIGS),
    api.DESCRIBE_LOG_DIRS: _cluster(D),
    api.SASL_AUTHENTICATE: lambda q, g: q,
    api.CREATE_PARTITIONS: _topics(("topics",), Operation.ALTER),
    api.DELETE_GROUPS: lambda q, g: g.names(q, ("groups_names",), G, Operation.DELETE, GROUP_DENIED),
    api.ELECT_LEADERS: _cluster(Operation.ALTER),
    api.INCREMENTAL_ALTER_CONFIGS: _configs(Operation.ALTER_CONFIGS),
    api.ALTER_PARTITION_REASSIGNMENTS: _cluster(Operation.ALTER),
    api.LIST_PARTITION_REASSIGNMENTS: _cluster(D),
    api.OFFSET_DELETE: _group(Operation.DELETE, _topics(("topics",), R)),
    api.DESCRIBE_CLIENT_QUOTAS: _cluster(Operation.DESCRIBE_CONFIGS),
    api.ALTER_CLIENT_QUOTAS: _cluster(Operation.ALTER_CONFIGS),
    api.DESCRIBE_USER_SCRAM_CREDENTIALS: _cluster(D),
    api.ALTER_USER_SCRAM_CREDENTIALS: _per_item_cluster(Operation.ALTER, _scram_alterations),
    api.DESCRIBE_CLUSTER: _cluster(D),
    api.DESCRIBE_PRODUCERS: _topics(("topics",), R),
    api.DESCRIBE_TRANSACTIONS: lambda q, g: g.names(q, ("transactional_ids",), X, D, TXN_DENIED),
    api.LIST_TRANSACTIONS: _list_filter("transaction_states", X),
    api.CONSUMER_GROUP_HEARTBEAT: _group(R, _subscribed("subscribed_topic_names")),
    api.CONSUMER_GROUP_DESCRIBE: lambda q, g: g.names(q, ("group_ids",), G, D, GROUP_DENIED),
    api.LIST_CONFIG_RESOURCES: _cluster(Operation.DESCRIBE_CONFIGS),
    api.DESCRIBE_TOPIC_PARTITIONS: _topics(("topics",), D),
    api.SHARE_GROUP_HEARTBEAT: _group(R, _subscribed("subscribed_topic_names")),
    api.SHARE_GROUP_DESCRIBE: lambda q, g: g.names(q, ("group_ids",), G, D, GROUP_DENIED),
    api.SHARE_FETCH: _group(R, _topics(("topics",), R)),
    api.SHARE_ACKNOWLEDGE: _group(R, _topics(("topics",), R)),
    api.DESCRIBE_SHARE_GROUP_OFFSETS: _share_offsets,
    api.ALTER_SHARE_GROUP_OFFSETS: _group(R, _topics(("topics",), R)),
    api.DELETE_SHARE_GROUP_OFFSETS: _group(Operation.DELETE, _topics(("topics",), R)),
    api.TXN_SHARE_ACKNOWLEDGE: _txn(_group(R, _topics(("topics",), R))),
}
DEFAULT_RULE = _cluster(Operation.ALTER)
"""An api without a rule here needs ALTER on the cluster (refuse rather than leave it open)."""


def denial_response(response_class: type[Any], code: ErrorCode) -> Any:
    """A response that refuses the whole request: every top-level ``error_code`` set to ``code``,
    lists empty, everything else zero or null."""
    return blank(response_class, error_code=code)


def install(table: HandlerTable, authorizer: Authorizer, extra: Iterable[tuple[int, Rule]] = ()) -> None:
    """Wrap every handler of ``table`` with its api's rule."""
    rules = dict(RULES)
    rules.update(extra)
    for api_key, versions in list(table.versions.items()):
        handler = table.get(api_key)
        assert handler is not None
        rule = rules.get(api_key, DEFAULT_RULE)
        table.register(api_key, versions, _guarded(handler, rule, authorizer))


def _guarded(handler: Any, rule: Rule, authorizer: Authorizer) -> Any:
    def guarded(request: Any, ctx: RequestContext) -> Any:
        gate = Gate(ctx, authorizer)
        gate.wants_operations = bool(getattr(request, "include_authorized_operations", False))
        try:
            request = rule(request, gate)
        except Denied as denied:
            return denial_response(ctx.codec.response_class, denied.code)
        except _Answer as answer:
            return answer.response
        response = handler(request, ctx)
        if inspect.isawaitable(response):
            return _finish_later(response, gate)
        return gate.finish(response)

    return guarded


async def _finish_later(response: Any, gate: Gate) -> Any:
    return gate.finish(await response)
