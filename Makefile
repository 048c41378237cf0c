# Two commands do everything on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

# Apache Kafka 4.4 for the differential tests (tests/compat/): the jars of tests/kafka-reference/pom.xml,
# resolved once from Maven Central into tests/kafka-reference/lib. Without Java and Maven the Kafka tests
# are skipped locally; in CI (CI=true) that is an error.
KAFKA_REF := tests/kafka-reference
KAFKA_STAMP := $(KAFKA_REF)/lib/.resolved
# Spark's own Kafka connector for the tests that run format("kafka") against shareq: the jars of
# tests/spark-kafka/pom.xml in their own lib directory, apart from Kafka 4.4's.
SPARK_KAFKA := tests/spark-kafka
SPARK_KAFKA_STAMP := $(SPARK_KAFKA)/lib/.resolved
# Kafka Streams of the same Kafka version, for the Streams differential test: tests/kafka-streams/pom.xml's
# jar in its own lib directory (what it depends on is among Kafka 4.4's jars).
KAFKA_STREAMS := tests/kafka-streams
KAFKA_STREAMS_STAMP := $(KAFKA_STREAMS)/lib/.resolved

# The web view's tests drive Debian's headless Chromium through its chromedriver (apt packages
# chromium and chromium-driver), installed here when missing and we are root or have sudo. Without
# them the browser tests are skipped locally; in CI (CI=true) that is an error.
BROWSER_PKGS := chromium chromium-driver

.PHONY: demo java-check test test-slow lint setup clean kafka browser compat compat-report fuzz

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# $(call resolve_jars,DIR,WHAT): DIR/pom.xml's runtime jars into DIR/lib, once per change of the pom.
define resolve_jars
	@if command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1; then \
		rm -rf $(1)/lib && \
		mvn -q -B -f $(1)/pom.xml dependency:copy-dependencies \
			-DoutputDirectory=lib -DincludeScope=runtime && \
		touch $(1)/lib/.resolved; \
	elif [ "$$CI" = "true" ]; then \
		echo "Java 17 and Maven are required in CI for the $(2) tests" >&2; exit 1; \
	else \
		echo "Java or Maven not found: the $(2) tests will be skipped" >&2; \
	fi
endef

$(KAFKA_STAMP): $(KAFKA_REF)/pom.xml
	$(call resolve_jars,$(KAFKA_REF),Kafka compatibility)

$(SPARK_KAFKA_STAMP): $(SPARK_KAFKA)/pom.xml
	$(call resolve_jars,$(SPARK_KAFKA),Spark Kafka connector)

$(KAFKA_STREAMS_STAMP): $(KAFKA_STREAMS)/pom.xml
	$(call resolve_jars,$(KAFKA_STREAMS),Kafka Streams)

kafka: $(KAFKA_STAMP) $(SPARK_KAFKA_STAMP) $(KAFKA_STREAMS_STAMP)

browser:
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then \
		:; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(BROWSER_PKGS) >/dev/null; \
	elif command -v apt-get >/dev/null 2>&1 && sudo -n true 2>/dev/null; then \
		sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(BROWSER_PKGS) >/dev/null; \
	elif [ "$$CI" = "true" ]; then \
		echo "The web view tests need Debian's $(BROWSER_PKGS) in CI: install them (apt-get as root)" >&2; exit 1; \
	else \
		echo "chromium or chromedriver not found (apt-get install $(BROWSER_PKGS)): the web view tests will be skipped" >&2; \
	fi

setup: $(STAMP) kafka browser

demo: java-check $(STAMP)
	$(VENV)/bin/shareq demo

# Spark runs on a JVM: say so at once, in one line, rather than after installing everything.
JAVA = $(shell command -v java 2>/dev/null || { test -n "$$JAVA_HOME" && test -x "$$JAVA_HOME/bin/java" && echo "$$JAVA_HOME/bin/java"; })
java-check:
	$(if $(JAVA),@:,$(error make demo needs Java 17 for Spark: install a JDK or JRE 17 (e.g. openjdk-17-jre-headless) and run it again))

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench
	$(VENV)/bin/mypy

test: lint kafka browser
	$(VENV)/bin/pytest -n 2 --dist loadgroup --durations=25

# The slow tier too: full-scale runs whose short forms are in `make test`.
test-slow: lint kafka
	$(VENV)/bin/pytest -n 2 --dist loadgroup --slow

# The long fuzz run: a million mutated and random frames beside a producer and a share consumer
# (the default suite sends 10,000). SHAREQ_FUZZ_SEED=n replays one seed.
fuzz: $(STAMP)
	SHAREQ_FUZZ_FRAMES=1000000 $(VENV)/bin/pytest -s tests/integration/test_fuzz_frames.py

# The differential tests alone, and docs/compatibility.md regenerated from their results.
compat: $(STAMP) kafka
	$(VENV)/bin/pytest tests/compat -n 2 --dist loadgroup

compat-report: $(STAMP) kafka
	-$(VENV)/bin/pytest tests/compat -n 2 --dist loadgroup --compat-results build/compat-results.json
	$(VENV)/bin/python tests/compat/report.py build/compat-results.json > docs/compatibility.md

clean:
	rm -rf $(VENV) $(KAFKA_REF)/lib $(KAFKA_STREAMS)/lib
