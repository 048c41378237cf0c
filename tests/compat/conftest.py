"""Differential tests: every test runs against Apache Kafka 4.4 (``kafka``) and shareq (``shareq``).

A test takes the ``server`` fixture and is collected twice, ids ``[kafka]`` and ``[shareq]``. Both servers
start once per test worker with the same broker configs (``COMMON``); all Kafka tests sit in the ``kafka``
xdist group so one worker owns the Kafka node. A difference that stays is marked on the test with
``@pytest.mark.shareq_xfail("reason")``: the shareq run is then a strict xfail, the Kafka run unchanged. The
test checks the difference with ``compat_support.as_kafka`` (after asserting what shareq does instead): only
the ``DiffersFromKafka`` it raises counts as the expected failure, any other error fails the shareq run.
"""

from __future__ import annotations

import sys
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "integration"))

from broker_harness import BrokerProcess
from compat_support import COMMON, Server, kafka_unavailable, known_difference

import kafka_harness


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "shareq_xfail(reason): shareq differs from Kafka here, for this reason"
    )


def _server_params(metafunc: pytest.Metafunc) -> list[object]:
    marker = metafunc.definition.get_closest_marker("shareq_xfail")
    shareq_marks = [] if marker is None else [known_difference(marker.args[0])]
    return [
        pytest.param("kafka", id="kafka", marks=[pytest.mark.xdist_group("kafka")]),
        pytest.param("shareq", id="shareq", marks=shareq_marks),
    ]


def _starts_kafka(item: pytest.Item) -> bool:
    """Whether this test starts Kafka: a cluster of its own, or the session's node not running yet."""
    callspec = getattr(item, "callspec", None)
    if callspec is None or callspec.params.get("server_kind") != "kafka":
        return False
    fixtures = getattr(item, "fixturenames", ())
    if "cluster" in fixtures:
        return True
    node = item.config.stash.get(_KAFKA_NODE, None)
    return "server" in fixtures and (node is None or not node.running())


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    """A test that starts Kafka gets kafka_harness.START_BOUND_S more than its timeout (set here, before
    pytest-timeout reads it): the start's own deadlines, not the test's timeout, bound the start."""
    marker = item.get_closest_marker("timeout")
    if _starts_kafka(item):
        if marker is not None:
            timeout = float(marker.args[0] if marker.args else marker.kwargs.get("timeout", 0))
        else:
            timeout = float(item.config.getini("timeout") or 0)
        if timeout > 0:
            item.add_marker(pytest.mark.timeout(timeout + kafka_harness.START_BOUND_S), append=False)
    yield


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "server_kind" in metafunc.fixturenames:
        metafunc.parametrize("server_kind", _server_params(metafunc))


class _KafkaNode:
    """The session's one-node Kafka, started on first use. If its process dies, the test it died in fails
    (``death``, checked as ``kafka_node`` is torn down) and a fresh node starts for the next test, so one
    lost JVM does not fail every later test."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.cluster: kafka_harness.KafkaCluster | None = None
        self.starts = 0
        self.death_reported = False

    def running(self) -> bool:
        return self.cluster is not None and all(n.alive() for n in self.cluster.nodes)

    def death(self) -> str | None:
        """How the node died, once (None while it runs, or once its death was told)."""
        if self.cluster is None or self.death_reported or all(n.alive() for n in self.cluster.nodes):
            return None
        self.death_reported = True
        node = self.cluster.nodes[0]
        assert node.process is not None
        return (
            f"the Kafka node died (exit status {node.process.returncode}); its log ends:\n{node.log_tail()}"
        )

    def server(self) -> Server:
        unreported = self.death()  # it died between tests
        if not self.running():
            if self.cluster is not None:
                self.cluster.stop()
            self.starts += 1
            self.death_reported = False
            self.cluster = kafka_harness.KafkaCluster(self.directory / f"run{self.starts}", 1, COMMON).start()
        if unreported is not None:
            pytest.fail(f"before this test, {unreported}", pytrace=False)
        return Server("kafka", self.cluster.bootstrap, nodes=1)

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()


_KAFKA_NODE = pytest.StashKey[_KafkaNode]()


@pytest.fixture(scope="session")
def _kafka_session(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[_KafkaNode]:
    try:
        kafka_harness.ensure_kafka_jars()
    except (kafka_harness.KafkaUnavailable, OSError) as error:
        kafka_unavailable(str(error))
    node = _KafkaNode(tmp_path_factory.mktemp("kafka"))
    pytestconfig.stash[_KAFKA_NODE] = node
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture
def kafka_node(_kafka_session: _KafkaNode) -> Iterator[Server]:
    """One KRaft node (broker + controller) shared by the tests of this worker; a test it dies in fails."""
    yield _kafka_session.server()
    if (death := _kafka_session.death()) is not None:
        pytest.fail(death, pytrace=False)


@pytest.fixture(scope="session")
def _shareq_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[BrokerProcess]]:
    brokers: list[BrokerProcess] = []
    try:
        yield brokers
    finally:
        for broker in brokers:
            broker.kill()


@pytest.fixture
def shareq_node(_shareq_session: list[BrokerProcess], tmp_path_factory: pytest.TempPathFactory) -> Server:
    """``shareq serve`` as a subprocess with the same broker configs as the Kafka node, shared by the tests
    of this worker. If its process died, the test it died in failed (tests/conftest.py) and another
    starts here."""
    if not _shareq_session or not _shareq_session[-1].alive():
        broker = BrokerProcess(
            tmp_path_factory.mktemp("shareq") / "data", *(f"{k}={v}" for k, v in COMMON.items())
        )
        _shareq_session.append(broker)
        broker.start()
    return Server("shareq", _shareq_session[-1].bootstrap, nodes=1)


@pytest.fixture
def server_kind() -> str:  # replaced by the parametrisation in pytest_generate_tests
    raise AssertionError("server_kind is parametrised")


@pytest.fixture
def server(server_kind: str, request: pytest.FixtureRequest) -> Server:
    node: Server = request.getfixturevalue(f"{server_kind}_node")
    return node


@pytest.fixture
def cluster(server_kind: str, tmp_path: Path) -> Iterator[Server]:
    """Kafka as a three-node cluster (started for the test); shareq as its single node."""
    if server_kind == "shareq":
        broker = BrokerProcess(tmp_path / "data", *(f"{k}={v}" for k, v in COMMON.items()))
        broker.start()
        try:
            yield Server("shareq", broker.bootstrap, nodes=1)
        finally:
            broker.kill()
        return
    try:
        kafka_harness.ensure_kafka_jars()
    except (kafka_harness.KafkaUnavailable, OSError) as error:
        kafka_unavailable(str(error))
    with kafka_harness.kafka_cluster(tmp_path / "kafka", 3, COMMON) as kafka:
        yield Server("kafka", kafka.bootstrap, nodes=3)


@pytest.fixture
def names(request: pytest.FixtureRequest) -> tuple[str, str]:
    """A topic and a group name unique to this test (both servers are shared by many tests)."""
    import uuid

    stem = request.node.originalname.removeprefix("test_").replace("_", "-")[:40]
    suffix = uuid.uuid4().hex[:8]
    return f"{stem}-{suffix}", f"g-{stem}-{suffix}"


@pytest.fixture(scope="session")
def java_tools() -> None:
    """Kafka's jars for its command-line tools and Java clients (run against either server)."""
    try:
        kafka_harness.ensure_kafka_jars()
    except (kafka_harness.KafkaUnavailable, OSError) as error:
        kafka_unavailable(str(error))
