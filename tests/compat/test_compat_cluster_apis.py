"""The cluster-level APIs a one-node cluster answers, against Kafka and shareq: DescribeQuorum (the node is
the metadata quorum's only voter and its leader), AlterReplicaLogDirs (one log dir: a move to it is done, any
other path is not found) and ApiVersions v5 (KIP-1242: a client naming another cluster or node is told to
rebootstrap)."""

from __future__ import annotations

import io
import socket
import struct
import sys
from typing import Any

import kio.index as ki
import pytest
from compat_support import Server, create_topic
from kafka import KafkaAdminClient
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32
from kio_wire import KioConnection, recv_frame

from shareq.protocol.codec import codec

pytestmark = pytest.mark.timeout(60)

DQ = sys.modules[ki.load_request_schema(55, 2).__module__]
ARL = sys.modules[ki.load_request_schema(34, 2).__module__]
DLD = sys.modules[ki.load_request_schema(35, 4).__module__]
METADATA = sys.modules[ki.load_request_schema(3, 12).__module__]
AV4 = sys.modules[ki.load_request_schema(18, 4).__module__]

NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST, LOG_DIR_NOT_FOUND, REBOOTSTRAP_REQUIRED = 0, 3, 42, 57, 129


def test_describe_metadata_quorum(server: Server) -> None:
    """kafka-python's describe_metadata_quorum: one voter, the leader, the controller describe_cluster
    names; no observers; the voter has caught up to the high watermark; the node is listed with endpoints."""
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=15000)
    try:
        quorum = admin.describe_metadata_quorum()
        controller = admin.describe_cluster()["controller_id"]
    finally:
        admin.close()
    (topic,) = quorum["topics"]
    (partition,) = topic["partitions"]
    (voter,) = partition["current_voters"]
    assert (topic["topic_name"], partition["partition_index"], partition["error"]) == (
        "__cluster_metadata",
        0,
        None,
    )
    assert partition["leader_id"] == voter["replica_id"] == controller
    assert partition["leader_epoch"] >= 1 and partition["observers"] == []
    assert voter["log_end_offset"] == partition["high_watermark"] >= 0
    assert voter["replica_directory_id"] is not None and voter["last_caught_up_timestamp"] > 0
    assert [(n["node_id"], len(n["listeners"]) >= 1) for n in quorum["nodes"]] == [(controller, True)]


@pytest.mark.parametrize(
    "asked",
    [[("__cluster_metadata", 1)], [("other", 0)], [("__cluster_metadata", 0), ("__cluster_metadata", 1)]],
)
def test_describe_quorum_of_another_partition(server: Server, asked: list[tuple[str, int]]) -> None:
    """Anything but __cluster_metadata-0 alone: each partition asked is UNKNOWN_TOPIC_OR_PARTITION."""
    topics: dict[str, list[int]] = {}
    for name, index in asked:
        topics.setdefault(name, []).append(index)
    conn = KioConnection(server.bootstrap)
    try:
        response = conn.send(
            DQ.DescribeQuorumRequest(
                topics=tuple(
                    DQ.TopicData(
                        topic_name=n, partitions=tuple(DQ.PartitionData(partition_index=p) for p in ps)
                    )
                    for n, ps in topics.items()
                )
            )
        )
    finally:
        conn.close()
    answered = [
        (t.topic_name, p.partition_index, int(p.error_code), p.error_message)
        for t in response.topics
        for p in t.partitions
    ]
    message = "This server does not host this topic-partition."
    assert (int(response.error_code), answered, response.nodes) == (
        NONE,
        [(n, i, UNKNOWN_TOPIC_OR_PARTITION, message) for n, i in asked],
        (),
    )


def test_alter_replica_log_dirs(server: Server, names: tuple[str, str]) -> None:
    """Moving partitions to the log dir they are in succeeds; another path, absolute or relative, is
    LOG_DIR_NOT_FOUND; a partition the broker does not have is UNKNOWN_TOPIC_OR_PARTITION."""
    topic = names[0]
    create_topic(server, topic, partitions=2)
    conn = KioConnection(server.bootstrap)
    try:
        (result,) = conn.send(DLD.DescribeLogDirsRequest(topics=None)).results
        log_dir = result.log_dir

        def move(path: str, name: str, partitions: tuple[int, ...]) -> list[tuple[str, int, int]]:
            wanted = ARL.AlterReplicaLogDirTopic(name=name, partitions=partitions)
            response = conn.send(
                ARL.AlterReplicaLogDirsRequest(dirs=(ARL.AlterReplicaLogDir(path=path, topics=(wanted,)),))
            )
            return sorted(
                (t.topic_name, p.partition_index, int(p.error_code))
                for t in response.results
                for p in t.partitions
            )

        assert move(log_dir, topic, (0, 1)) == [(topic, 0, NONE), (topic, 1, NONE)]
        assert move(log_dir + "-elsewhere", topic, (0,)) == [(topic, 0, LOG_DIR_NOT_FOUND)]
        assert move("relative/dir", topic, (1,)) == [(topic, 1, LOG_DIR_NOT_FOUND)]
        assert move(log_dir, topic, (7,)) == [(topic, 7, UNKNOWN_TOPIC_OR_PARTITION)]
        assert move(log_dir, f"{topic}-missing", (0,)) == [
            (f"{topic}-missing", 0, UNKNOWN_TOPIC_OR_PARTITION)
        ]
    finally:
        conn.close()


def _api_versions_v5(server: Server, cluster_id: str | None, node_id: int) -> Any:
    """ApiVersions v5 by hand (kio stops at v4; the request adds the cluster and node the client means)."""
    v5 = codec(18, 5)
    out = io.BytesIO()
    header = v5.request_class.__header_schema__
    entity_writer(header)(
        out, header(request_api_key=18, request_api_version=5, correlation_id=7, client_id="compat")
    )
    request = v5.request_class(
        client_software_name="compat",
        client_software_version="1",
        cluster_id=cluster_id,
        node_id=i32(node_id),
    )
    entity_writer(v5.request_class)(out, request)
    host, port = server.bootstrap.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(out.getvalue())) + out.getvalue())
        reply = recv_frame(sock)
    assert struct.unpack_from(">i", reply)[0] == 7
    response, _ = entity_reader(v5.response_class)(reply, 4)
    return response


def test_api_versions_v5(server: Server) -> None:
    """ApiVersions is advertised up to v5. A v5 request naming no target, or this node of this cluster,
    gets the api list; naming another cluster or node gets REBOOTSTRAP_REQUIRED and nothing else; naming
    only one of the two is INVALID_REQUEST."""
    conn = KioConnection(server.bootstrap)
    try:
        advertised = conn.send(
            AV4.ApiVersionsRequest(client_software_name="compat", client_software_version="1")
        )
        metadata = conn.send(
            METADATA.MetadataRequest(
                topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
            )
        )
    finally:
        conn.close()
    assert {k.api_key: k.max_version for k in advertised.api_keys}[18] == 5
    cluster, node = metadata.cluster_id, metadata.controller_id

    def outcome(cluster_id: str | None, node_id: int) -> tuple[int, bool]:
        response = _api_versions_v5(server, cluster_id, node_id)
        return int(response.error_code), bool(response.api_keys)

    assert outcome(None, -1) == (NONE, True)
    assert outcome(cluster, node) == (NONE, True)
    assert outcome("another-cluster-id", node) == (REBOOTSTRAP_REQUIRED, False)
    assert outcome(cluster, node + 7) == (REBOOTSTRAP_REQUIRED, False)
    assert outcome(cluster, -1) == (INVALID_REQUEST, False)
    assert outcome(None, node) == (INVALID_REQUEST, False)
