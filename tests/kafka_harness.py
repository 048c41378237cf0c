"""Apache Kafka 4.4 (the reference broker) on loopback for tests: one KRaft node or a three-node cluster.

The jars come from ``tests/kafka-reference/pom.xml``, copied by ``make kafka`` (or on first use, here)
into ``tests/kafka-reference/lib``. A node is a ``java -cp 'lib/*' kafka.Kafka server.properties`` in its
own process group with fresh directories; it is formatted with ``StorageTool`` first, started, polled
until it answers Metadata with every node of its cluster, and stopped by killing its process group.
Broker configs are given as Kafka names, the same way shareq takes ``--config``.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import ctypes
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

KAFKA_DIR = Path(__file__).resolve().parent / "kafka-reference"
KAFKA_LIB = KAFKA_DIR / "lib"
RESOLVED_STAMP = KAFKA_LIB / ".resolved"
STREAMS_DIR = Path(__file__).resolve().parent / "kafka-streams"
START_DEADLINE_S = 90.0
FORMAT_TIMEOUT_S = 60.0
# The longest a cluster's start may take (formatting, then every node ready): a test that starts one
# needs a timeout at least this much longer than what the test itself takes.
START_BOUND_S = FORMAT_TIMEOUT_S + START_DEADLINE_S
JVM_OPTS = (
    "-Xmx512m",
    "-Xms256m",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-Djava.awt.headless=true",
)

# Broker settings that make a test node start fast and small on a two-core machine.
NODE_DEFAULTS = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "num.network.threads": "2",
    "num.io.threads": "2",
    "num.recovery.threads.per.data.dir": "1",
    "background.threads": "2",
    "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),
    "log.cleaner.threads": "1",
}

# Internal topics on one node need replication factor 1.
SINGLE_NODE = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
}

LOG4J2 = """\
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.console.ref = STDOUT
"""

_RUNNING: dict[int, subprocess.Popen[bytes]] = {}


class KafkaUnavailable(RuntimeError):
    """Java, Maven or the resolved jars are missing."""


def random_id() -> str:
    """A Kafka cluster or directory id: 16 random bytes, base64url without padding; like Kafka's
    ``Uuid.randomUuid``, never one starting with "-" (a command line would read it as an option)."""
    while True:
        value = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not value.startswith("-"):
            return value


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def ensure_kafka_jars() -> Path:
    """The directory of resolved jars, resolving them with Maven once if needed (under a file lock,
    so parallel test workers resolve once)."""
    return _resolve(KAFKA_DIR)


def ensure_streams_jars() -> Path:
    """Kafka Streams' jar (``tests/kafka-streams/pom.xml``; its dependencies are Kafka's jars), resolved
    like :func:`ensure_kafka_jars`."""
    ensure_kafka_jars()
    return _resolve(STREAMS_DIR)


def _resolve(directory: Path) -> Path:
    lib, stamp = directory / "lib", directory / "lib" / ".resolved"
    if stamp.exists():
        return lib
    if shutil.which("java") is None:
        raise KafkaUnavailable("java is not on PATH")
    if shutil.which("mvn") is None:
        raise KafkaUnavailable(
            f"the jars of {directory.name} are not resolved (make kafka) and mvn is not on PATH"
        )
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".resolve.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not stamp.exists():
            shutil.rmtree(lib, ignore_errors=True)
            subprocess.run(
                [
                    "mvn",
                    "-q",
                    "-B",
                    "-f",
                    str(directory / "pom.xml"),
                    "dependency:copy-dependencies",
                    "-DoutputDirectory=lib",
                    "-DincludeScope=runtime",
                ],
                check=True,
                timeout=600,
            )
            stamp.touch()
    return lib


def java_command(main_class: str, *args: str, jvm_opts: tuple[str, ...] = ()) -> list[str]:
    """``java -cp 'lib/*' CLASS ARGS`` with the resolved jars (a tool: small heap, quick start)."""
    lib = ensure_kafka_jars()
    if shutil.which("java") is None:
        raise KafkaUnavailable("java is not on PATH")
    return ["java", *jvm_opts, "-cp", f"{lib}/*", main_class, *args]


def run_tool(main_class: str, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's command-line classes to completion (its own process group, killed on timeout)."""
    log4j = KAFKA_DIR / "lib" / "log4j2-tools.properties"
    if not log4j.exists():
        log4j.write_text(LOG4J2.replace("WARN", "ERROR"))
    command = java_command(
        main_class,
        *args,
        jvm_opts=(
            "-Xmx256m",
            "-XX:TieredStopAtLevel=1",
            "-XX:+UseSerialGC",
            f"-Dlog4j2.configurationFile={log4j}",
        ),
    )
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_detach_and_die_with_parent,
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        raise
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def _detach_and_die_with_parent() -> None:
    """In the child before exec: its own process group (so it is stopped as a group), and on Linux a
    SIGKILL when the process that started it dies, so a crashed test worker leaves no JVM behind."""
    os.setsid()
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _kill_group(process: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=15)


@atexit.register
def _kill_leftovers() -> None:
    for process in list(_RUNNING.values()):
        _kill_group(process)


class KafkaNode:
    """One KRaft node (broker and controller combined) of a cluster."""

    def __init__(self, directory: Path, node_id: int, properties: Mapping[str, str]) -> None:
        self.directory = directory
        self.node_id = node_id
        self.properties = dict(properties)
        self.port = int(self.properties["listeners"].split(",")[0].rsplit(":", 1)[1])
        self.process: subprocess.Popen[bytes] | None = None
        self.config_file = directory / "server.properties"
        self.log_file = directory / "kafka.out"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def write_config(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text("".join(f"{k}={v}\n" for k, v in self.properties.items()))
        (self.directory / "log4j2.properties").write_text(LOG4J2)

    def format(self, cluster_id: str, *extra: str) -> None:
        result = run_tool(
            "kafka.tools.StorageTool",
            *("format", "-t", cluster_id, "-c", str(self.config_file), *extra),
            timeout=FORMAT_TIMEOUT_S,
        )
        if result.returncode != 0:
            raise RuntimeError(f"StorageTool format failed: {result.stdout}{result.stderr}")

    def start(self) -> None:
        log4j = self.directory / "log4j2.properties"
        command = java_command(
            "kafka.Kafka",
            str(self.config_file),
            jvm_opts=(*JVM_OPTS, f"-Dlog4j2.configurationFile={log4j}"),
        )
        with open(self.log_file, "ab") as log:
            self.process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_detach_and_die_with_parent,
            )
        _RUNNING[self.process.pid] = self.process

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def kill(self) -> None:
        if self.process is not None:
            _kill_group(self.process)
            _RUNNING.pop(self.process.pid, None)


class KafkaCluster:
    """``nodes`` KRaft nodes with one cluster id; every node is a voter of the controller quorum."""

    def __init__(self, directory: Path, nodes: int = 1, configs: Mapping[str, str] | None = None) -> None:
        self.directory = directory
        self.cluster_id = random_id()
        ports = [(free_port(), free_port()) for _ in range(nodes)]
        quorum = ",".join(f"127.0.0.1:{c}" for _, c in ports)
        self.nodes: list[KafkaNode] = []
        for node_id, (port, controller) in enumerate(ports):
            props = {
                "process.roles": "broker,controller",
                "node.id": str(node_id),
                "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
                "controller.listener.names": "CONTROLLER",
                "inter.broker.listener.name": "PLAINTEXT",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "controller.quorum.bootstrap.servers": quorum,
                "log.dirs": str(directory / f"node{node_id}" / "data"),
                **NODE_DEFAULTS,
                **(SINGLE_NODE if nodes == 1 else {}),
                **(configs or {}),
            }
            self.nodes.append(KafkaNode(directory / f"node{node_id}", node_id, props))

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    def start(self, deadline_s: float = START_DEADLINE_S) -> KafkaCluster:
        for node in self.nodes:
            node.write_config()
        if len(self.nodes) == 1:
            self.nodes[0].format(self.cluster_id, "--standalone")
        else:
            dir_ids = [random_id() for _ in self.nodes]
            voters = ",".join(
                f"{n.node_id}@127.0.0.1:{n.properties['listeners'].rsplit(':', 1)[1]}:{d}"
                for n, d in zip(self.nodes, dir_ids, strict=True)
            )
            # formatted side by side, within one deadline; on a timeout or a failure none is left running
            formats: list[subprocess.Popen[bytes]] = []
            try:
                for n in self.nodes:
                    formats.append(
                        subprocess.Popen(
                            java_command(
                                "kafka.tools.StorageTool",
                                *("format", "-t", self.cluster_id, "-c", str(n.config_file)),
                                *("--initial-controllers", voters),
                                jvm_opts=("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"),
                            ),
                            stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT,
                            preexec_fn=_detach_and_die_with_parent,
                        )
                    )
                deadline = time.monotonic() + FORMAT_TIMEOUT_S
                for process in formats:
                    out, _ = process.communicate(timeout=max(0.0, deadline - time.monotonic()))
                    if process.returncode != 0:
                        raise RuntimeError(f"StorageTool format failed: {out.decode(errors='replace')}")
            finally:
                for process in formats:
                    _kill_group(process)
        try:
            for node in self.nodes:
                node.start()
            self.wait_ready(deadline_s)
        except BaseException:
            self.stop()
            raise
        return self

    def wait_ready(self, deadline_s: float) -> None:
        """Poll every node with a Metadata request until each lists all nodes (or the deadline passes)."""
        from shareq.client import Cluster

        deadline = time.monotonic() + deadline_s
        pending = list(self.nodes)
        last_error: Exception | None = None
        while pending:
            node = pending[0]
            if not node.alive():
                raise RuntimeError(f"Kafka node {node.node_id} exited:\n{node.log_tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"Kafka node {node.node_id} not ready: {last_error}\n{node.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", node.port), timeout=1):
                    pass
                cluster = Cluster(node.bootstrap, request_timeout=5.0)
                try:
                    cluster.refresh_metadata(())
                    if len(cluster.cache.brokers) == len(self.nodes):
                        pending.pop(0)
                        continue
                finally:
                    cluster.close()
            except Exception as error:
                last_error = error
            time.sleep(0.2)

    def stop(self) -> None:
        for node in self.nodes:
            node.kill()


@contextlib.contextmanager
def kafka_cluster(
    directory: Path, nodes: int = 1, configs: Mapping[str, str] | None = None
) -> Iterator[KafkaCluster]:
    """A started cluster, stopped (process groups killed) on exit, whatever happened."""
    cluster = KafkaCluster(directory, nodes, configs)
    try:
        yield cluster.start()
    finally:
        cluster.stop()
