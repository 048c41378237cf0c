"""Transactions: produce throughput, commit latency, consume-transform-produce against no transactions.

    PYTHONPATH=src python bench/transactions.py [--records 200000] [--txn-size 1000] [--commits 200]

One broker runs as a subprocess (``python -m shareq serve``). It prints, from one run:

* produce throughput of librdkafka's transactional producer, transactions of ``--txn-size``
  records (100 B) over 4 partitions, against the same records through the idempotent producer
  (target >= 0.5x);
* commit latency (``commit_transaction`` of a transaction holding one record), p50 and p99;
* the consume-transform-produce loop (a group Consumer reading ``--records`` records, a
  transactional producer writing one output per input, ``send_offsets_to_transaction`` and a
  commit every ``--txn-size`` inputs) in records/s, against the same loop without transactions
  (an idempotent producer and a synchronous offset commit per ``--txn-size`` inputs).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from broker_process import free_port
from share_consume import create_topic, start_broker, stop_broker

PARTITIONS = 4
VALUE = b"x" * 100


def produce_rate(bootstrap: str, topic: str, records: int, txn_size: int, transactional: bool) -> float:
    from confluent_kafka import Producer

    config: dict[str, object] = {"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True}
    if transactional:
        config["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
    producer = Producer(config)
    if transactional:
        producer.init_transactions(30)
    start = time.perf_counter()
    for first in range(0, records, txn_size):
        if transactional:
            producer.begin_transaction()
        for i in range(first, min(first + txn_size, records)):
            while True:
                try:
                    producer.produce(topic, VALUE, partition=i % PARTITIONS)
                    break
                except BufferError:
                    producer.poll(0.01)
        if transactional:
            producer.commit_transaction(60)  # flushes first
    assert producer.flush(60) == 0
    return records / (time.perf_counter() - start)


def commit_latencies(bootstrap: str, topic: str, commits: int) -> list[float]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"lat-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(30)
    out = []
    for i in range(commits):
        producer.begin_transaction()
        producer.produce(topic, VALUE, partition=i % PARTITIONS)
        assert producer.flush(30) == 0
        start = time.perf_counter()
        producer.commit_transaction(30)
        out.append(time.perf_counter() - start)
    return out


def ctp_rate(bootstrap: str, source: str, records: int, txn_size: int, transactional: bool) -> float:
    """Copy ``records`` from ``source`` to a new topic; records/s from the first record read."""
    from confluent_kafka import Consumer, Producer

    sink = f"sink-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, sink, PARTITIONS)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"ctp-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    config: dict[str, object] = {"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True}
    if transactional:
        config["transactional.id"] = f"ctp-{uuid.uuid4().hex[:8]}"
    producer = Producer(config)
    if transactional:
        producer.init_transactions(30)
    consumer.subscribe([source])
    done = 0
    start: float | None = None
    in_txn = 0
    while done < records:
        batch = [m for m in consumer.consume(1000, timeout=0.5) if m.error() is None]
        if not batch:
            continue
        if start is None:
            start = time.perf_counter()
        for m in batch:
            if transactional and in_txn == 0:
                producer.begin_transaction()
            while True:
                try:
                    producer.produce(sink, m.value(), partition=m.partition())
                    break
                except BufferError:
                    producer.poll(0.01)
            in_txn += 1
            done += 1
            if in_txn == txn_size or done == records:
                if transactional:
                    positions = consumer.position(consumer.assignment())
                    producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
                    producer.commit_transaction(60)
                else:
                    assert producer.flush(60) == 0
                    consumer.commit(asynchronous=False)
                in_txn = 0
    assert start is not None
    rate = records / (time.perf_counter() - start)
    consumer.close()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--txn-size", type=int, default=1000)
    parser.add_argument("--commits", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="shareq-bench-txn-") as data:
        port = free_port()
        broker = start_broker(Path(data), port)
        bootstrap = f"127.0.0.1:{port}"
        try:
            for name in ("warm", "idem", "txn", "lat", "source"):
                create_topic(bootstrap, name, PARTITIONS)
            produce_rate(bootstrap, "warm", 20_000, args.txn_size, transactional=False)  # warm-up, not shown
            idem = produce_rate(bootstrap, "idem", args.records, args.txn_size, transactional=False)
            txn = produce_rate(bootstrap, "txn", args.records, args.txn_size, transactional=True)
            print(f"produce, {args.records} records of 100 B on {PARTITIONS} partitions")
            print(f"  idempotent producer            {idem:>10,.0f} rec/s")
            ratio = txn / idem
            print(
                f"  transactions of {args.txn_size:<6}       {txn:>10,.0f} rec/s   {ratio:.2f}x"
                " (target >= 0.5x)"
            )
            lat = sorted(commit_latencies(bootstrap, "lat", args.commits))
            p50 = statistics.median(lat) * 1000
            p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000
            print(
                f"commit latency, {args.commits} one-record transactions: p50 {p50:.2f} ms, p99 {p99:.2f} ms"
            )
            produce_rate(bootstrap, "source", args.records, args.txn_size, transactional=False)
            plain = ctp_rate(bootstrap, "source", args.records, args.txn_size, transactional=False)
            exact = ctp_rate(bootstrap, "source", args.records, args.txn_size, transactional=True)
            print(f"consume-transform-produce, {args.records} records, a commit every {args.txn_size}")
            print(f"  without transactions           {plain:>10,.0f} rec/s")
            print(f"  transactional (exactly once)   {exact:>10,.0f} rec/s   {exact / plain:.2f}x")
        finally:
            stop_broker(broker)


if __name__ == "__main__":
    main()
