"""Throughput of shareq.client's Producer and Consumer against an embedded broker (not run by the tests).

Usage: python bench/client_throughput.py [records] [value_bytes]
"""

from __future__ import annotations

import sys
import time

from shareq.client import Admin, Consumer, OffsetSpec, Producer
from shareq.embedded import EmbeddedBroker


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    value = b"x" * size
    with EmbeddedBroker() as broker:
        with Admin(broker.bootstrap) as admin:
            admin.create_topic("bench", 4)
        with Producer(broker.bootstrap, batch_size=256 * 1024) as producer:
            start = time.perf_counter()
            for i in range(n):
                producer.send("bench", value, key=b"%d" % i)
            producer.flush()
            elapsed = time.perf_counter() - start
        print(f"produce: {n} x {size} B in {elapsed:.2f} s = {n / elapsed:,.0f} records/s")
        with Consumer(broker.bootstrap) as consumer:
            consumer.assign({("bench", p): OffsetSpec.EARLIEST for p in range(4)})
            got = 0
            start = time.perf_counter()
            while got < n:
                got += len(consumer.poll(1.0, max_records=10_000))
            elapsed = time.perf_counter() - start
        print(f"consume: {got} records in {elapsed:.2f} s = {got / elapsed:,.0f} records/s")


if __name__ == "__main__":
    main()
