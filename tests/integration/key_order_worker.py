"""A worker process of the key-ordering checker: librdkafka ShareConsumers (explicit
acknowledgement) on threads, logging every receive and every acknowledgement with the host clock.

Usage: ``key_order_worker.py BOOTSTRAP GROUP TOPIC LOG STOPFILE CONSUMERS SEED``. Each consumer
processes a poll's records in order with a random short pause, sometimes RELEASEs one (and then
every later record of the same key in that poll, as a key-ordered application must), ACCEPTs the
rest and commits. Log lines (space separated):

- ``R consumer partition offset key time`` when a record is received;
- ``A consumer partition offset key type sent ok`` after the commit: ``sent`` is the time the
  acknowledgement left (so a hold is [received, sent]), ``ok`` whether the broker confirmed it.
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time

from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer

FAST = {
    "socket.timeout.ms": 3000,
    "reconnect.backoff.ms": 20,
    "reconnect.backoff.max.ms": 200,
    "retry.backoff.ms": 20,
    "retry.backoff.max.ms": 200,
    "topic.metadata.refresh.interval.ms": 1000,
}


def run(
    cid: str,
    bootstrap: str,
    group: str,
    topic: str,
    out: list[str],
    lock: threading.Lock,
    stop: str,
    seed: int,
) -> None:
    rnd = random.Random(seed)
    consumer = ShareConsumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit", **FAST}
    )
    consumer.subscribe([topic])
    try:
        while not os.path.exists(stop):
            try:
                messages = consumer.poll(0.2)
            except KafkaException:
                continue
            messages = [m for m in messages if m.error() is None]
            if not messages:
                continue
            now = time.time()
            lines = [f"R {cid} {m.partition()} {m.offset()} {m.key().decode()} {now:.6f}" for m in messages]
            released: set[tuple[int, bytes]] = set()
            acks: list[tuple[int, int, str, str]] = []
            # at most one record of a poll is RELEASEd (a first delivery, picked at random), and
            # with it every later record of its key in the poll, as a key-ordered application does
            unlucky = rnd.randrange(len(messages)) if rnd.random() < 0.5 else -1
            for i, m in enumerate(messages):
                k = (m.partition(), m.key())
                if k in released or (i == unlucky and m.delivery_count() == 1):
                    released.add(k)
                    kind = AcknowledgeType.RELEASE
                else:
                    kind = AcknowledgeType.ACCEPT
                if rnd.random() < 0.2:
                    time.sleep(rnd.random() * 0.004)  # processing
                consumer.acknowledge(m, kind)
                acks.append((m.partition(), m.offset(), m.key().decode(), kind.name))
            sent = time.time()
            try:
                results = consumer.commit_sync(5)
                confirmed = {tp.partition for tp, error in results.items() if error is None}
            except KafkaException:
                confirmed = set()
            lines += [f"A {cid} {p} {o} {k} {t} {sent:.6f} {int(p in confirmed)}" for p, o, k, t in acks]
            with lock:
                out.extend(lines)
    finally:
        consumer.close()


def main() -> None:
    bootstrap, group, topic, log_path, stop, consumers, seed = sys.argv[1:8]
    out: list[str] = []
    lock = threading.Lock()
    threads = [
        threading.Thread(
            target=run,
            args=(f"{os.getpid()}-{i}", bootstrap, group, topic, out, lock, stop, int(seed) * 10 + i),
            daemon=True,
        )
        for i in range(int(consumers))
    ]
    for t in threads:
        t.start()
    with open(log_path, "a") as f:
        while any(t.is_alive() for t in threads):
            time.sleep(0.05)
            with lock:
                lines, out[:] = list(out), []
            if lines:
                f.write("\n".join(lines) + "\n")
                f.flush()


if __name__ == "__main__":
    main()
