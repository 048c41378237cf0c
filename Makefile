# Two commands do everything on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

# Apache Kafka 4.4 for the differential tests (tests/compat/): the jars of tests/kafka-reference/pom.xml,
# resolved once from Maven Central into tests/kafka-reference/lib. Without Java and Maven the Kafka tests
# are skipped locally; in CI (CI=true) that is an error.
KAFKA_REF := tests/kafka-reference
KAFKA_STAMP := $(KAFKA_REF)/lib/.resolved

.PHONY: demo java-check test lint setup clean kafka compat compat-report fuzz

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[dev]'
	touch $(STAMP)

$(KAFKA_STAMP): $(KAFKA_REF)/pom.xml
	@if command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1; then \
		rm -rf $(KAFKA_REF)/lib && \
		mvn -q -B -f $(KAFKA_REF)/pom.xml dependency:copy-dependencies \
			-DoutputDirectory=lib -DincludeScope=runtime && \
		touch $@; \
	elif [ "$$CI" = "true" ]; then \
		echo "Java 17 and Maven are required in CI for the Kafka compatibility tests" >&2; exit 1; \
	else \
		echo "Java or Maven not found: the Kafka compatibility tests will be skipped" >&2; \
	fi

kafka: $(KAFKA_STAMP)

setup: $(STAMP) kafka

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

test: lint kafka
	$(VENV)/bin/pytest -n 2 --dist loadgroup

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
	rm -rf $(VENV) $(KAFKA_REF)/lib
