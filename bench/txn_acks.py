"""Exactly-once share pipeline (KIP-1289) against the same pipeline at least once.

One broker subprocess; N records of 100 B on P partitions in topic ``in``. Each phase runs W workers
(a ShareConsumer of a fresh share group plus a producer) that copy ``in`` to an output topic until
every record is done:

- ``eos``: per poll one transaction: the outputs plus ``send_share_acknowledgements_to_transaction``;
- ``alo``: per poll the outputs flushed by an idempotent producer, then a plain ShareAcknowledge.

Prints records/s of both and the ratio (target >= 0.5).

    PYTHONPATH=src python bench/txn_acks.py [--records 20000] [--workers 2] [--partitions 2] [--max-poll 500]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import uuid

from broker_process import free_port, start_broker
from shareq.client import AcknowledgeType, Admin, Producer, ShareConsumer

CONFIGS = (
    "share.transactional.acks.enable=true",
    "group.share.auto.offset.reset=earliest",
    "group.share.min.heartbeat.interval.ms=200",
    "group.share.heartbeat.interval.ms=300",
)


def _run(bootstrap: str, source: str, records: int, workers: int, eos: bool, max_poll: int) -> float:
    group = f"bench-{'eos' if eos else 'alo'}-{uuid.uuid4().hex[:6]}"
    sink = f"out-{uuid.uuid4().hex[:6]}"
    with Admin(bootstrap) as admin:
        admin.create_topic(sink, 2)
    done = [0]
    lock = threading.Lock()
    stop = threading.Event()

    def worker(i: int) -> None:
        consumer = ShareConsumer(bootstrap, group, topics=[source], max_poll_records=max_poll)
        if eos:
            producer = Producer(bootstrap, transactional_id=f"{group}-{i}")
            producer.init_transactions()
        else:
            producer = Producer(bootstrap)
        try:
            while not stop.is_set():
                got = consumer.poll(0.2)
                if not got:
                    continue
                if eos:
                    producer.begin_transaction()
                for r in got:
                    producer.send(sink, r.value, partition=r.partition % 2)
                if eos:
                    producer.send_share_acknowledgements_to_transaction(
                        [(r, AcknowledgeType.ACCEPT) for r in got], consumer.share_group_metadata()
                    )
                    producer.commit_transaction()
                else:
                    producer.flush()
                    for r in got:
                        consumer.acknowledge(r, AcknowledgeType.ACCEPT)
                    consumer.commit()
                with lock:
                    done[0] += len(got)
                    if done[0] >= records:
                        stop.set()
        finally:
            consumer.close()
            producer.close()

    start = time.monotonic()
    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(workers)]
    for t in threads:
        t.start()
    stop.wait(600)
    elapsed = time.monotonic() - start
    for t in threads:
        t.join(30)
    return records / elapsed


def _fmt(rates: list[float]) -> str:
    return ", ".join(f"{r:.0f}" for r in rates)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--max-poll", type=int, default=500, help="records per poll (= per transaction)")
    ap.add_argument(
        "--rounds", type=int, default=3, help="alternating rounds of both phases; medians reported"
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-txn-acks-") as data:
        port = free_port()
        proc = start_broker(
            data, port, configs=CONFIGS, args=("--host", "127.0.0.1"), log_level=None, quiet=True
        )
        bootstrap = f"127.0.0.1:{port}"
        try:
            source = f"in-{uuid.uuid4().hex[:6]}"
            with Admin(bootstrap) as admin:
                admin.create_topic(source, args.partitions)
            payload = b"x" * 100
            with Producer(bootstrap) as p:
                for i in range(args.records):
                    p.send(source, payload, partition=i % args.partitions)
            alos: list[float] = []
            eoss: list[float] = []
            for n in range(args.rounds):  # alternate, and swap the order each round
                order = (False, True) if n % 2 == 0 else (True, False)
                for eos_phase in order:
                    rate = _run(
                        bootstrap, source, args.records, args.workers, eos=eos_phase, max_poll=args.max_poll
                    )
                    (eoss if eos_phase else alos).append(rate)
            alo, eos = statistics.median(alos), statistics.median(eoss)
        finally:
            proc.kill()
            proc.wait(10)
    print(
        f"records={args.records} workers={args.workers} partitions={args.partitions} max_poll={args.max_poll}"
    )
    print(f"at-least-once (ShareAcknowledge):     {alo:10.0f} records/s  (rounds: {_fmt(alos)})")
    print(f"exactly-once (TxnShareAcknowledge):   {eos:10.0f} records/s  (rounds: {_fmt(eoss)})")
    print(f"ratio eos/alo: {eos / alo:.2f}  (target >= 0.5)")


if __name__ == "__main__":
    main()
