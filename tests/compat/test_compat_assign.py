"""A librdkafka ``Consumer`` with a ``group.id`` that calls ``assign()`` or ``incremental_assign()``
without offsets: the client asks the group coordinator for committed offsets (OffsetFetch) and starts
there. A broker without OffsetFetch once made librdkafka dereference a NULL and the Python process exit
with signal 11, so the client runs in a child process with its own deadline."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from compat_support import Server, create_topic, produce

pytestmark = pytest.mark.timeout(90)

_ASSIGN_CONSUMER = """
import sys, time
from confluent_kafka import Consumer, TopicPartition
bootstrap, topic, group, mode = sys.argv[1:5]
config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
          "enable.auto.commit": False, "socket.timeout.ms": 5000}
if mode == "commit":
    c = Consumer(config)
    c.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
    c.close()
    print("committed", flush=True)
    sys.exit(0)
c = Consumer(config)
if mode == "assign":
    c.assign([TopicPartition(topic, 0)])
else:
    c.incremental_assign([TopicPartition(topic, 0)])
got, deadline = [], time.monotonic() + 15
while len(got) < 3 and time.monotonic() < deadline:
    m = c.poll(0.2)
    if m is not None and m.error() is None:
        got.append(m.offset())
print(got, flush=True)
c.close()
"""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _ASSIGN_CONSUMER, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ.copy(),
    )


@pytest.mark.parametrize("mode", ["assign", "incremental_assign"])
def test_assign_with_group_id_starts_at_the_committed_offset(
    server: Server, names: tuple[str, str], mode: str
) -> None:
    """Offset 2 committed for the group; assign() without an offset reads from 2 (records 2, 3, 4)."""
    topic, group = names
    create_topic(server, topic)
    produce(server, topic, [b"r%d" % i for i in range(5)])
    committed = _run(server.bootstrap, topic, group, "commit")
    assert (committed.returncode, committed.stdout.strip()) == (0, "committed"), committed.stderr[-2000:]
    result = _run(server.bootstrap, topic, group, mode)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[2, 3, 4]"


@pytest.mark.parametrize("mode", ["assign", "incremental_assign"])
def test_assign_with_group_id_and_no_commit(server: Server, names: tuple[str, str], mode: str) -> None:
    """Nothing committed: auto.offset.reset=earliest applies (records 0, 1, 2)."""
    topic, group = names
    create_topic(server, topic)
    produce(server, topic, [b"r%d" % i for i in range(3)])
    result = _run(server.bootstrap, topic, group, mode)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[0, 1, 2]"
