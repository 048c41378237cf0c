"""``/metrics`` while librdkafka clients work: the figures move as the queue does.

A REJECT raises the archived count, a lapsed lock the expiry count, a RELEASE the redelivery count
once the record comes back, and lag falls to 0 once the group has drained the partition.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from broker_harness import free_port
from confluent_kafka import AcknowledgeType, Consumer, Producer, TopicPartition
from monitor_support import get, scrape, value, wait_for_metric
from share_consumers import FAST, SHARE_BROKER, create_topic, poll_values, produce, share_consumer

from shareq.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

PART = {"group": "g", "topic": "m", "partition": "0"}
ARCHIVED = "shareq_share_partition_records_archived_total"
LAG = "shareq_share_partition_lag_records"
EXPIRED = "kafka_server_sharepartitionmetrics_acquisitionlocktimeoutpersec_total"
ACKS = "kafka_server_sharegroupmetrics_recordacknowledgementspersec_total"


def _serve(data_dir: Path) -> list[str]:
    return [sys.executable, "-m", "shareq", "serve", "--data-dir", str(data_dir), "--port", "0"]


def test_reject_archives_release_redelivers_and_lag_drains_to_zero(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "d", config={**SHARE_BROKER, "http.port": 0}) as broker:
        url = broker.http_url
        create_topic(broker.bootstrap, "m", 1)
        produce(broker.bootstrap, "m", [b"v%d" % i for i in range(30)], 1, per_batch=10)
        before = scrape(url)
        assert value(before, "kafka_log_log_logendoffset", topic="m", partition="0") == 30
        assert value(before, "kafka_network_requestmetrics_requestspersec_total", request="Produce") >= 3
        assert value(before, "kafka_server_brokertopicmetrics_bytesinpersec_total") > 0

        consumer = share_consumer(broker.bootstrap, "g", ["m"], **{"share.acknowledgement.mode": "explicit"})
        try:
            kinds = {0: AcknowledgeType.ACCEPT, 1: AcknowledgeType.RELEASE, 2: AcknowledgeType.REJECT}
            first = poll_values(
                consumer,
                lambda out: len(out) >= 30,
                on_message=lambda m: consumer.acknowledge(m, kinds[m.offset() % 3]),
            )
            assert len(first) == 30
            # Acquired, not yet acknowledged: all 30 in flight and still lag.
            held = scrape(url)
            assert value(held, "shareq_share_partition_records", **PART, state="ACQUIRED") == 30
            assert value(held, LAG, **PART) == 30
            assert value(held, ARCHIVED, **PART) == 0
            assert value(held, "shareq_share_partition_lag_seconds", **PART) > 0

            assert all(v is None for v in consumer.commit_sync().values())
            acked = wait_for_metric(
                url, lambda s: value(s, ARCHIVED, **PART) == 10, what="10 rejected records archived"
            )
            assert value(acked, ACKS, acktype="Reject") == 10
            assert value(acked, ACKS, acktype="Accept") == 10
            assert value(acked, ACKS, acktype="Release") == 10
            assert value(acked, "shareq_share_partition_records", **PART, state="AVAILABLE") == 10
            assert value(acked, LAG, **PART) == 10  # the released ones are still to be done
            assert value(acked, "shareq_share_partition_records_redelivered_total", **PART) == 0
            assert value(acked, "shareq_share_ack_latency_seconds_count", group="g") > 0

            again = poll_values(
                consumer,
                lambda out: len(out) >= 10,
                on_message=lambda m: consumer.acknowledge(m, AcknowledgeType.ACCEPT),
            )
            assert {m.delivery_count() for m in again} == {2}
            assert all(v is None for v in consumer.commit_sync().values())
            drained = wait_for_metric(url, lambda s: value(s, LAG, **PART) == 0, what="lag 0 after draining")
            assert value(drained, "shareq_share_partition_records_redelivered_total", **PART) == 10
            assert value(drained, ACKS, acktype="Accept") == 20
            assert value(drained, "shareq_share_partition_start_offset", **PART) == 30
            assert value(drained, "shareq_share_partition_lag_seconds", **PART) == 0
            groups = "kafka_server_group_coordinator_metrics_share_group_count"
            assert value(drained, groups, state="Stable") == 1
            assert value(drained, "kafka_server_brokertopicmetrics_totalsharefetchrequestspersec_total") > 0
            assert value(drained, "kafka_network_requestmetrics_totaltimems_count", request="ShareFetch") > 0
            assert value(drained, "kafka_server_share_coordinator_metrics_write_total") > 0
            assert value(drained, "shareq_share_state_log_bytes_total") > 0
            assert value(drained, "kafka_server_sharegroupmetrics_partitionloadtimems_count") == 1
            assert value(drained, "kafka_server_socket_server_metrics_connection_count") >= 1
        finally:
            consumer.close()


def test_a_lapsed_lock_raises_the_expiry_count(tmp_path: Path) -> None:
    config = {
        **SHARE_BROKER,
        "group.share.min.record.lock.duration.ms": "500",
        "group.share.record.lock.duration.ms": "1000",
        "http.port": 0,
    }
    with EmbeddedBroker(tmp_path / "d", config=config) as broker:
        url = broker.http_url
        create_topic(broker.bootstrap, "m", 1)
        produce(broker.bootstrap, "m", [b"e%d" % i for i in range(5)], 1, per_batch=5)
        consumer = share_consumer(broker.bootstrap, "g", ["m"], **{"share.acknowledgement.mode": "explicit"})
        try:
            # Take the records and sit on them: the member stays (heartbeats go on), the locks lapse.
            assert len(poll_values(consumer, lambda out: len(out) >= 5)) == 5
            assert value(scrape(url), EXPIRED, **PART) == 0
            expired = wait_for_metric(url, lambda s: value(s, EXPIRED, **PART) == 5, what="5 lock expiries")
            assert value(expired, "shareq_share_partition_records", **PART, state="AVAILABLE") == 5
            assert value(expired, "shareq_share_partition_records_released_total", **PART) == 5
        finally:
            consumer.close()


def test_health_endpoints_and_the_serve_flag(tmp_path: Path) -> None:
    http_port = free_port()
    process = subprocess.Popen(
        [*_serve(tmp_path / "d"), "--http-port", str(http_port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline(), process.stdout.readline()]
        assert lines[0].startswith(f"shareq http on http://127.0.0.1:{http_port}/"), lines
        assert lines[1].startswith("shareq listening on "), lines
        base = f"http://127.0.0.1:{http_port}"
        assert get(base + "/healthz") == (200, "ok\n")
        assert get(base + "/readyz") == (200, "ready\n")
        status, page = get(base + "/")
        assert status == 200 and '<script src="/view.js">' in page
        status, text = get(base + "/metrics")
        assert status == 200 and "kafka_server_group_coordinator_metrics_share_group_count" in text
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0


def test_metrics_are_off_unless_a_port_is_set(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "d") as broker:
        assert broker.broker.monitor is None
        with pytest.raises(RuntimeError, match=r"http\.port"):
            _ = broker.http_url


def test_http_port_in_use_is_one_clear_line(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "a", config={"http.port": 0}) as first:
        taken = first.broker.monitor.port if first.broker.monitor else 0
        started = time.monotonic()
        result = subprocess.run(
            [*_serve(tmp_path / "b"), "--http-port", str(taken)],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert result.returncode == 1
        assert f"HTTP server failed to bind to 127.0.0.1:{taken}: Address already in use." in result.stderr
        assert "Traceback" not in result.stderr
        assert time.monotonic() - started < 30


def test_readyz_says_503_until_the_broker_is_ready(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "d", config={"http.port": 0}) as broker:
        url = broker.http_url
        assert get(url + "/readyz") == (200, "ready\n")
        # As during start-up (logs recovering): readiness off, the port still answers.
        broker.call(lambda: setattr(broker.broker, "ready", False))
        status, reason = get(url + "/readyz")
        assert status == 503 and reason.startswith("starting")
        assert get(url + "/healthz") == (200, "ok\n")
        status, text = get(url + "/metrics")
        assert status == 200 and "process_cpu_seconds_total" in text and "kafka_log_log" not in text
        broker.call(lambda: setattr(broker.broker, "ready", True))
        assert get(url + "/readyz") == (200, "ready\n")


def test_consumer_group_lag_and_open_transactions(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "d", config={"http.port": 0}) as broker:
        url = broker.http_url
        create_topic(broker.bootstrap, "c", 1)
        produce(broker.bootstrap, "c", [b"c%d" % i for i in range(20)], 1, per_batch=10)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "cg", **FAST})
        try:
            consumer.commit(offsets=[TopicPartition("c", 0, 5)], asynchronous=False)
        finally:
            consumer.close()
        labels = {"consumergroup": "cg", "topic": "c", "partition": "0"}
        samples = scrape(url)
        assert value(samples, "kafka_consumergroup_current_offset", **labels) == 5
        assert value(samples, "kafka_consumergroup_lag", **labels) == 15
        state = json.loads(get(url + "/api/state")[1])
        assert [(g["group_id"], g["lag"]) for g in state["consumer_groups"]] == [("cg", 15)]

        producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "t1", **FAST})
        producer.init_transactions(15)
        producer.begin_transaction()
        producer.produce("c", b"in-txn", partition=0)
        producer.flush(15)
        open_txn = scrape(url)
        assert value(open_txn, "shareq_transactions_open") == 1
        assert value(open_txn, "shareq_log_lso_lag_records", topic="c", partition="0") == 1
        assert value(open_txn, "kafka_consumergroup_lag", **labels) == 15  # read up to the LSO
        producer.commit_transaction(15)
        done = wait_for_metric(url, lambda s: value(s, "shareq_transactions_open") == 0, what="txn closed")
        assert value(done, "shareq_log_lso_lag_records", topic="c", partition="0") == 0
        assert value(done, "kafka_consumergroup_lag", **labels) == 17  # the record and its marker


def test_the_view_stays_small_with_many_partitions(tmp_path: Path) -> None:
    """Past 48 share-partitions a group shows strips for the most lagging and one summary row."""
    with EmbeddedBroker(tmp_path / "d", config={**SHARE_BROKER, "http.port": 0}) as broker:
        create_topic(broker.bootstrap, "wide", 60)
        produce(broker.bootstrap, "wide", [b"w%d" % i for i in range(10)], 60, per_batch=1)
        consumer = share_consumer(broker.bootstrap, "g", ["wide"])
        try:
            deadline = time.monotonic() + 30
            loaded = 0
            while loaded < 60 and time.monotonic() < deadline:
                consumer.poll(0.2)
                loaded = broker.call(lambda: sum(1 for _ in broker.broker.share.partitions))  # type: ignore[union-attr]
            assert loaded == 60
        finally:
            consumer.close()
        state = json.loads(get(broker.http_url + "/api/state")[1])
        (group,) = state["share_groups"]
        assert len(group["partitions"]) == 48 and group["more"]["count"] == 12
        assert all(len(p["strip"]) <= 120 for p in group["partitions"])
        samples = scrape(broker.http_url)
        assert sum(1 for name, _ in samples if name == "shareq_share_partition_lag_records") == 60
