"""Share-group admin APIs (ShareGroupDescribe, ListGroups, Describe/Alter/DeleteShareGroupOffsets,
DeleteGroups) with shareq's admin client, against Kafka and shareq: fields and error codes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from compat_support import (
    Server,
    count_at_least,
    create_topic,
    earliest_group,
    poll_until,
    produce,
    share_consumer,
    wait_equal,
)
from kio.schema.errors import ErrorCode

from shareq.client import Admin, KafkaError

pytestmark = pytest.mark.timeout(90)


@dataclass
class Consumed:
    server: Server
    topic: str
    group: str
    consumer: Any
    admin: Admin


@pytest.fixture
def consumed(server: Server, names: tuple[str, str]) -> Iterator[Consumed]:
    """A group whose one librdkafka member (client.id compat-client) consumed and accepted 5 records."""
    topic, group = names
    create_topic(server, topic)
    earliest_group(server, group)
    produce(server, topic, [b"m%d" % i for i in range(5)])
    consumer = share_consumer(server, group, [topic], **{"client.id": "compat-client"})
    admin = Admin(server.bootstrap)
    try:
        assert len(poll_until(consumer, count_at_least(5))) == 5
        consumer.commit_sync()
        yield Consumed(server, topic, group, consumer, admin)
    finally:
        consumer.close()
        admin.close()


def _close_and_wait_empty(c: Consumed) -> None:
    c.consumer.close()
    wait_equal(lambda: c.admin.describe_share_group(c.group).state, "Empty", timeout=20)


def _offsets(c: Consumed) -> dict[int, tuple[int, int | None]]:
    found = c.admin.describe_share_group_offsets(c.group, {c.topic: [0]})
    return {p: (o.start_offset, o.lag) for (_t, p), o in found.items()}


def test_describe_share_group(consumed: Consumed) -> None:
    """ShareGroupDescribe of a group with one member: Stable, assignor simple, epochs in step, the member's
    client id, subscription and assignment."""
    d = consumed.admin.describe_share_group(consumed.group)
    assert (d.state, d.assignor, d.error) == ("Stable", "simple", ErrorCode.none)
    assert d.group_epoch == d.assignment_epoch >= 1
    assert len(d.members) == 1
    m = d.members[0]
    assert (m.client_id, m.rack_id, m.member_epoch) == ("compat-client", None, d.group_epoch)
    assert m.subscribed_topics == (consumed.topic,)
    assert dict(m.assignment) == {consumed.topic: (0,)}
    assert len(m.member_id) == 22


def test_describe_share_group_member_host(consumed: Consumed) -> None:
    """A member's host is shown as Kafka prints an InetAddress: /127.0.0.1."""
    d = consumed.admin.describe_share_group(consumed.group)
    assert [m.client_host for m in d.members] == ["/127.0.0.1"]


def test_describe_unknown_share_group(server: Server, names: tuple[str, str]) -> None:
    """ShareGroupDescribe of a group that does not exist: GROUP_ID_NOT_FOUND."""
    with Admin(server.bootstrap) as admin:
        d = admin.describe_share_groups([names[1]])[names[1]]
    assert d.error == ErrorCode.group_id_not_found


def test_list_groups_shows_share_group(consumed: Consumed) -> None:
    """ListGroups v5 lists the group with type share, protocol type share and state Stable."""
    listed = [g for g in consumed.admin.list_groups() if g.group_id == consumed.group]
    assert [(g.type, g.protocol_type, g.state) for g in listed] == [("share", "share", "Stable")]


def test_describe_offsets_before_consumption(server: Server, names: tuple[str, str]) -> None:
    """DescribeShareGroupOffsets of a partition the group never read: start offset -1, no lag, no error."""
    create_topic(server, names[0])
    with Admin(server.bootstrap) as admin:
        found = admin.describe_share_group_offsets(names[1], {names[0]: [0]})
    o = found[(names[0], 0)]
    assert (o.start_offset, o.lag, o.error) == (-1, None, ErrorCode.none)


def test_describe_offsets_after_consumption(consumed: Consumed) -> None:
    """After 5 records are accepted and acknowledged: the topic id is given and the lag is 0."""
    wait_equal(lambda: _offsets(consumed)[0][1], 0, timeout=15)
    o = consumed.admin.describe_share_group_offsets(consumed.group, {consumed.topic: [0]})[
        (consumed.topic, 0)
    ]
    assert o.topic_id == consumed.admin.describe_topic(consumed.topic).topic_id


def test_alter_offsets_of_active_group(consumed: Consumed) -> None:
    """AlterShareGroupOffsets while the group has a member: NON_EMPTY_GROUP."""
    with pytest.raises(KafkaError) as raised:
        consumed.admin.alter_share_group_offsets(consumed.group, {(consumed.topic, 0): 2})
    assert raised.value.code == ErrorCode.non_empty_group


def test_delete_offsets_of_active_group(consumed: Consumed) -> None:
    """DeleteShareGroupOffsets while the group has a member: NON_EMPTY_GROUP."""
    with pytest.raises(KafkaError) as raised:
        consumed.admin.delete_share_group_offsets(consumed.group, [consumed.topic])
    assert raised.value.code == ErrorCode.non_empty_group


def test_delete_active_group(consumed: Consumed) -> None:
    """DeleteGroups of a group with a member: NON_EMPTY_GROUP."""
    result = consumed.admin.delete_groups([consumed.group], raise_on_error=False)
    assert result == {consumed.group: ErrorCode.non_empty_group}


def test_alter_offsets_of_empty_group(consumed: Consumed) -> None:
    """Once the member left (state Empty), AlterShareGroupOffsets to 2: start offset 2, lag 3."""
    _close_and_wait_empty(consumed)
    result = consumed.admin.alter_share_group_offsets(consumed.group, {(consumed.topic, 0): 2})
    assert result == {(consumed.topic, 0): ErrorCode.none}
    assert _offsets(consumed) == {0: (2, 3)}


def test_alter_offsets_unknown_topic(consumed: Consumed) -> None:
    """AlterShareGroupOffsets naming a topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION for it."""
    _close_and_wait_empty(consumed)
    missing = "missing-" + consumed.topic
    result = consumed.admin.alter_share_group_offsets(consumed.group, {(missing, 0): 2}, raise_on_error=False)
    assert result == {(missing, 0): ErrorCode.unknown_topic_or_partition}


def test_delete_offsets_of_empty_group(consumed: Consumed) -> None:
    """DeleteShareGroupOffsets of an empty group: the partition's start offset is -1 again and the group
    describes no offsets when asked for all."""
    _close_and_wait_empty(consumed)
    assert consumed.admin.delete_share_group_offsets(consumed.group, [consumed.topic]) == {
        consumed.topic: ErrorCode.none
    }
    assert _offsets(consumed) == {0: (-1, None)}
    assert consumed.admin.describe_share_group_offsets(consumed.group, None) == {}


def test_delete_empty_group(consumed: Consumed) -> None:
    """DeleteGroups of an empty share group: no error; then it is not found, and deleting it again says
    GROUP_ID_NOT_FOUND."""
    _close_and_wait_empty(consumed)
    assert consumed.admin.delete_groups([consumed.group]) == {consumed.group: ErrorCode.none}
    assert consumed.admin.describe_share_groups([consumed.group])[consumed.group].error == (
        ErrorCode.group_id_not_found
    )
    again = consumed.admin.delete_groups([consumed.group], raise_on_error=False)
    assert again == {consumed.group: ErrorCode.group_id_not_found}


def test_member_leaves_on_close(consumed: Consumed) -> None:
    """Closing the only member empties the group and bumps its epoch."""
    before = consumed.admin.describe_share_group(consumed.group).group_epoch
    _close_and_wait_empty(consumed)
    after = consumed.admin.describe_share_group(consumed.group)
    assert after.members == ()
    assert after.group_epoch > before
