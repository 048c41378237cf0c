"""The broker's metrics in Prometheus' text format, built at scrape time (prometheus_client).

Where Kafka has the metric, its name is Kafka's MBean or metric-group name flattened the way the
usual JMX-exporter rules do it (``kafka.server:type=ShareGroupMetrics,name=RecordAcknowledgementsPerSec,
ackType=Accept`` becomes ``kafka_server_sharegroupmetrics_recordacknowledgementspersec_total
{acktype="Accept"}``); meters are counters (take ``rate()``), Kafka's millisecond histograms keep
their units. What Kafka lacks (per share-partition lag and states, state-log bytes, ...) is named
``shareq_*``. docs/operations.md lists them all.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from kio.index import api_key_map  # type: ignore[attr-defined]  # (not re-exported, but public)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from shareq.histogram import Histogram
from shareq.share import AcknowledgeType, RecordState
from shareq.share.stats import ACK_LATENCY_BOUNDS_MS

from ..topics import is_internal
from .figures import SharePartitionFigures, share_partition_figures

if TYPE_CHECKING:
    from ..broker import Broker

_OPEN_TXN_STATES = ("ONGOING", "PREPARE_COMMIT", "PREPARE_ABORT", "PREPARE_EPOCH_FENCE")
SHARE_FETCH, SHARE_ACKNOWLEDGE, PRODUCE, FETCH = 78, 79, 0, 1


def request_name(api_key: int) -> str:
    """Kafka's request name (``ShareFetch``) for an api key, as its RequestMetrics tag it."""
    snake: str | None = api_key_map.get(api_key)
    return "".join(p.capitalize() for p in snake.split("_")) if snake else str(api_key)


def ack_type_name(ack: AcknowledgeType) -> str:
    """Kafka's ``ackType`` tag value: ``Accept``, ``Release``, ``Reject``, ``Renew`` (and ``Gap``)."""
    return ack.name.capitalize()


def _histogram(
    name: str, doc: str, labels: list[str], series: Iterable[tuple[list[str], Histogram]], scale: float = 1.0
) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc, labels=labels)
    for values, histogram in series:
        buckets: list[tuple[str, float]] = []
        running = 0
        for bound, n in zip(histogram.bounds, histogram.buckets, strict=False):
            running += n
            buckets.append((repr(float(bound * scale)), running))
        buckets.append(("+Inf", histogram.count))
        family.add_metric(values, buckets, histogram.total * scale)
    return family


class BrokerCollector(Collector):
    """Reads the broker's counters and state on each scrape (the broker's own loop calls it)."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def collect(self) -> Iterator[Metric]:
        broker = self._broker
        if not broker.ready or broker.stopping:
            return  # logs not open (yet, or any more): only the process metrics are served
        now_ms = time.time_ns() // 1_000_000
        yield from self._requests()
        yield from self._network()
        yield from self._logs()
        figures = share_partition_figures(broker, now_ms)
        yield from self._share_groups()
        yield from self._share_partitions(figures)
        yield from self._share_state()
        yield from self._consumer_groups()
        yield from self._transactions()

    # -- requests and bytes --------------------------------------------------------------------

    def _requests(self) -> Iterator[Metric]:
        broker = self._broker
        by_api = sorted(broker.io.by_api.items())
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requestspersec", "Requests answered, by api.", labels=["request"]
        )
        received = CounterMetricFamily(
            "shareq_request_bytes_received", "Request bytes received (framing included).", labels=["request"]
        )
        sent = CounterMetricFamily(
            "shareq_response_bytes_sent", "Response bytes sent (framing included).", labels=["request"]
        )
        read = CounterMetricFamily(
            "shareq_log_bytes_read", "Log bytes read to answer requests.", labels=["request"]
        )
        delivered = CounterMetricFamily(
            "shareq_records_delivered",
            "Records handed out (Fetch: in the batches sent; ShareFetch: acquired).",
            labels=["request"],
        )
        for api_key, io in by_api:
            name = [request_name(api_key)]
            requests.add_metric(name, io.requests)
            received.add_metric(name, io.bytes_received)
            sent.add_metric(name, io.bytes_sent)
            read.add_metric(name, io.bytes_read)
            if io.records_delivered:
                delivered.add_metric(name, io.records_delivered)
        yield from (requests, received, sent, read, delivered)
        yield _histogram(
            "kafka_network_requestmetrics_totaltimems",
            "Time from a request's frame to its reply sent, in ms, by api.",
            ["request"],
            ((([request_name(k)]), h) for k, h in sorted(broker.counters.request_latency.items())),
            scale=1000.0,
        )
        by_key = broker.io.by_api
        produce, fetch, share_fetch = by_key.get(PRODUCE), by_key.get(FETCH), by_key.get(SHARE_FETCH)
        bytes_in = CounterMetricFamily(
            "kafka_server_brokertopicmetrics_bytesinpersec", "Produce request bytes received."
        )
        bytes_in.add_metric([], produce.bytes_received if produce else 0)
        bytes_out = CounterMetricFamily(
            "kafka_server_brokertopicmetrics_bytesoutpersec", "Record bytes sent by Fetch and ShareFetch."
        )
        bytes_out.add_metric(
            [], (fetch.bytes_delivered if fetch else 0) + (share_fetch.bytes_delivered if share_fetch else 0)
        )
        share_fetches = CounterMetricFamily(
            "kafka_server_brokertopicmetrics_totalsharefetchrequestspersec", "ShareFetch requests."
        )
        share_fetches.add_metric([], share_fetch.requests if share_fetch else 0)
        share_acks = CounterMetricFamily(
            "kafka_server_brokertopicmetrics_totalshareacknowledgementrequestspersec",
            "ShareAcknowledge requests.",
        )
        ack_io = by_key.get(SHARE_ACKNOWLEDGE)
        share_acks.add_metric([], ack_io.requests if ack_io else 0)
        yield from (bytes_in, bytes_out, share_fetches, share_acks)

    def _network(self) -> Iterator[Metric]:
        broker = self._broker
        count = GaugeMetricFamily(
            "kafka_server_socket_server_metrics_connection_count", "Open client connections."
        )
        count.add_metric([], broker.open_connections)
        created = CounterMetricFamily(
            "kafka_server_socket_server_metrics_connection_creation", "Client connections accepted."
        )
        created.add_metric([], broker.connections_accepted)
        yield from (count, created)

    def _logs(self) -> Iterator[Metric]:
        broker = self._broker
        labels = ["topic", "partition"]
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset.", labels=labels)
        start = GaugeMetricFamily("kafka_log_log_logstartoffset", "Log start offset.", labels=labels)
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes in the partition's segments.", labels=labels)
        lso_lag = GaugeMetricFamily(
            "shareq_log_lso_lag_records",
            "Records between the last stable offset and the log end (open transactions hold them).",
            labels=labels,
        )
        for (topic, index), partition in sorted(broker.partitions.items()):
            if is_internal(topic):
                continue  # the 50 state partitions would double a scrape; their bytes are counted apart
            plog = partition.log
            values = [topic, str(index)]
            leo = plog.log_end_offset
            end.add_metric(values, leo)
            start.add_metric(values, plog.log_start_offset)
            size.add_metric(values, plog.size_bytes)
            lso_lag.add_metric(values, leo - plog.last_stable_offset)
        yield from (end, start, size, lso_lag)

    # -- share groups --------------------------------------------------------------------------

    def _share_groups(self) -> Iterator[Metric]:
        share = self._broker.share
        if share is None:
            return
        listings = share.coordinator.list_groups()
        by_state = GaugeMetricFamily(
            "kafka_server_group_coordinator_metrics_share_group_count",
            "Share groups, by state.",
            labels=["state"],
        )
        counts = {"Empty": 0, "Stable": 0}
        for listing in listings:
            counts[listing.group_state] = counts.get(listing.group_state, 0) + 1
        for state, n in counts.items():
            by_state.add_metric([state], n)
        groups = GaugeMetricFamily(
            "kafka_server_group_coordinator_metrics_group_count", "Groups, by protocol.", labels=["protocol"]
        )
        groups.add_metric(["share"], len(listings))
        classic = self._broker.consumer_groups
        if classic is not None:
            groups.add_metric(["classic"], len(classic.coordinator.group_ids()))
            groups.add_metric(["consumer"], len(classic.consumer.group_ids()))
        sessions = GaugeMetricFamily(
            "kafka_server_sharesessioncache_sharesessionscount", "Share sessions open."
        )
        sessions.add_metric([], len(share.sessions))
        cached = GaugeMetricFamily(
            "kafka_server_sharesessioncache_sharepartitionscount", "Share-partitions loaded on this broker."
        )
        cached.add_metric([], sum(1 for _ in share.partitions))
        yield from (by_state, groups, sessions, cached)
        yield _histogram(
            "kafka_server_sharegroupmetrics_partitionloadtimems",
            "Time to load a share-partition's state, in ms.",
            [],
            [([], self._broker.counters.partition_load)],
            scale=1000.0,
        )

    def _share_partitions(self, figures: list[SharePartitionFigures]) -> Iterator[Metric]:
        labels = ["group", "topic", "partition"]

        def gauge(name: str, doc: str, extra: list[str] | None = None) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, labels=labels + (extra or []))

        def counter(name: str, doc: str) -> CounterMetricFamily:
            return CounterMetricFamily(name, doc, labels=labels)

        in_flight = gauge("kafka_server_sharepartitionmetrics_inflightmessagecount", "In-flight records.")
        batches = gauge("kafka_server_sharepartitionmetrics_inflightbatchcount", "In-flight batches (runs).")
        timeouts = counter(
            "kafka_server_sharepartitionmetrics_acquisitionlocktimeoutpersec",
            "Records whose acquisition lock expired before they were acknowledged.",
        )
        spso = gauge("shareq_share_partition_start_offset", "The share-partition start offset (SPSO).")
        speo = gauge("shareq_share_partition_end_offset", "The share-partition end offset (SPEO).")
        lag = gauge(
            "shareq_share_partition_lag_records",
            "Records at or past the SPSO not yet acknowledged or archived, up to the log end (or LSO).",
        )
        lag_s = gauge(
            "shareq_share_partition_lag_seconds", "Age of the record at the SPSO while it is not done."
        )
        states = gauge("shareq_share_partition_records", "In-flight records by state.", ["state"])
        ordered = gauge(
            "shareq_share_partition_key_ordered",
            "1 when the group orders by key (shareq.share.ordering=key).",
        )
        blocked = gauge(
            "shareq_share_partition_blocked_keys",
            "Key-ordered groups: distinct keys with a record held (at the last acquisition).",
        )
        waiting = gauge(
            "shareq_share_partition_key_waiting_records",
            "Key-ordered groups: records the last acquisition looked past because their key was held.",
        )
        delayed = gauge(
            "shareq_share_partition_delayed_records", "AVAILABLE records waiting out a redelivery backoff."
        )
        next_due = gauge(
            "shareq_share_partition_next_redelivery_timestamp_seconds",
            "When the first delayed record becomes deliverable again (0: none).",
        )
        window = gauge(
            "shareq_share_partition_window_count_mode",
            "1 when the in-flight window counts records (count mode).",
        )
        acquired = counter("shareq_share_partition_records_acquired", "Records acquired (every delivery).")
        redelivered = counter(
            "shareq_share_partition_records_redelivered", "Records acquired again (delivery count above 1)."
        )
        archived = counter("shareq_share_partition_records_archived", "Records archived.")
        dead = counter(
            "shareq_share_partition_records_dead_lettered", "Records archived after their dead-letter write."
        )
        released = counter(
            "shareq_share_partition_records_released", "Records made available again (release or expiry)."
        )
        acks_total = [0] * len(AcknowledgeType)
        latency_by_group: dict[str, Histogram] = {}
        for f in figures:
            values = [f.group, f.topic, str(f.partition)]
            stats = f.stats
            in_flight.add_metric(values, sum(f.by_state.values()))
            batches.add_metric(values, f.batches)
            timeouts.add_metric(values, stats.lock_expired)
            spso.add_metric(values, f.spso)
            speo.add_metric(values, f.speo)
            lag.add_metric(values, f.lag)
            lag_s.add_metric(values, f.lag_seconds or 0.0)
            ordered.add_metric(values, 1 if f.ordering == "key" else 0)
            blocked.add_metric(values, f.blocked_keys)
            waiting.add_metric(values, f.key_waiting)
            delayed.add_metric(values, f.delayed)
            next_due.add_metric(values, (f.next_redelivery_ms or 0) / 1000.0)
            window.add_metric(values, 1 if f.window_mode == "count" else 0)
            for state in (
                RecordState.AVAILABLE,
                RecordState.ACQUIRED,
                RecordState.ACKNOWLEDGED,
                RecordState.ARCHIVING,
                RecordState.ARCHIVED,
                RecordState.TX_PENDING,
            ):
                states.add_metric([*values, state.name], f.by_state[state])
            acquired.add_metric(values, stats.acquired)
            redelivered.add_metric(values, stats.redelivered)
            archived.add_metric(values, stats.archived)
            dead.add_metric(values, stats.dead_lettered)
            released.add_metric(values, stats.released)
            for ack in AcknowledgeType:
                acks_total[ack] += stats.acknowledged[ack]
            group_latency = latency_by_group.get(f.group)
            if group_latency is None:
                group_latency = latency_by_group[f.group] = Histogram(ACK_LATENCY_BOUNDS_MS)
            for i, n in enumerate(stats.ack_latency_buckets):
                group_latency.buckets[i] += n
            group_latency.count += stats.ack_latency_count
            group_latency.total += stats.ack_latency_sum_ms
        yield from (in_flight, batches, timeouts, spso, speo, lag, lag_s, states, delayed, next_due, window)
        yield from (ordered, blocked, waiting)
        yield from (acquired, redelivered, archived, dead, released)
        acks = CounterMetricFamily(
            "kafka_server_sharegroupmetrics_recordacknowledgementspersec",
            "Records acknowledged, by acknowledgement type.",
            labels=["acktype"],
        )
        for ack in AcknowledgeType:
            acks.add_metric([ack_type_name(ack)], acks_total[ack])
        yield acks
        yield _histogram(
            "shareq_share_ack_latency_seconds",
            "Time from acquisition to acknowledgement, by group (compare with the lock duration).",
            ["group"],
            (([group], h) for group, h in sorted(latency_by_group.items())),
            scale=0.001,
        )

    def _share_state(self) -> Iterator[Metric]:
        share = self._broker.share
        if share is None:
            return
        persister = share.persister
        writes = CounterMetricFamily(
            "kafka_server_share_coordinator_metrics_write", "WriteShareGroupState calls completed."
        )
        writes.add_metric([], persister.writes)
        written = CounterMetricFamily(
            "shareq_share_state_log_bytes", "Bytes appended to the share-group state log."
        )
        written.add_metric([], persister.bytes_appended)
        records = CounterMetricFamily(
            "shareq_share_state_log_records", "Records appended to the share-group state log."
        )
        records.add_metric([], persister.records_appended)
        yield from (writes, written, records)
        yield _histogram(
            "shareq_share_state_write_latency_seconds",
            "Time from a share-state write being queued to it being durable.",
            [],
            [([], persister.write_latency)],
        )

    # -- consumer groups and transactions ------------------------------------------------------

    def _consumer_groups(self) -> Iterator[Metric]:
        broker = self._broker
        services = broker.consumer_groups
        labels = ["consumergroup", "topic", "partition"]
        lag = GaugeMetricFamily(
            "kafka_consumergroup_lag", "Log end (LSO) less the committed offset.", labels=labels
        )
        current = GaugeMetricFamily("kafka_consumergroup_current_offset", "Committed offset.", labels=labels)
        if services is not None:
            for group_id in sorted(services.offsets.group_ids()):
                for (topic, index), committed in sorted(services.offsets.fetch(group_id).items()):
                    partition = broker.partition(topic, index)
                    if partition is None:
                        continue
                    values = [group_id, topic, str(index)]
                    current.add_metric(values, committed.offset)
                    lag.add_metric(values, max(partition.log.visible_stable_offset - committed.offset, 0))
        yield from (lag, current)

    def _transactions(self) -> Iterator[Metric]:
        txns = self._broker.transactions
        open_txns = GaugeMetricFamily("shareq_transactions_open", "Transactions not yet complete.")
        count = 0
        if txns is not None:
            count = sum(1 for meta in txns.coordinator if meta.state.name in _OPEN_TXN_STATES)
        open_txns.add_metric([], count)
        yield open_txns
