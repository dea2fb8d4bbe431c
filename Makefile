# Two entry points: `make run` (the embedded default) and `make test` (the whole suite).
# Everything else is a step of those two.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
DATA   ?= .hqueue-data
HOST   ?= 127.0.0.1
PORT   ?= 9090
ZK_JAR := /usr/share/java/zookeeper.jar

.PHONY: run test venv deps-test zookeeper lint typecheck pytest bench clean

run: $(BIN)/hqueue
	$(BIN)/hqueue standalone --data-dir $(DATA) --host $(HOST) --port $(PORT)

$(BIN)/hqueue: setup.cfg pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $@

venv: $(BIN)/hqueue

deps-test: $(BIN)/hqueue
	$(BIN)/pip install --quiet -e '.[test,spark,bench]'

# Debian's package carries ZooKeeper's jars; the test harness runs them with the machine's Java.
zookeeper:
	@if [ ! -f $(ZK_JAR) ]; then \
	  echo "installing Debian's zookeeper package"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q zookeeper >/dev/null || \
	  (apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q zookeeper >/dev/null); \
	fi

lint: deps-test
	$(BIN)/ruff check .
	$(BIN)/mypy

pytest: deps-test zookeeper
	PYSPARK_PYTHON=$(CURDIR)/$(BIN)/python $(BIN)/pytest -q

test: lint pytest

# The queue benchmark's peers, run from Debian's packages (bench/peers.py starts them).
.PHONY: bench-deps
bench-deps:
	@if [ ! -x /usr/bin/redis-server ] || [ ! -x /usr/sbin/nats-server ]; then \
	  echo "installing Debian's redis-server and nats-server packages"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server nats-server >/dev/null || \
	  (apt-get update -q >/dev/null && \
	   DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server nats-server >/dev/null); \
	fi

bench: deps-test bench-deps
	$(BIN)/python bench/bench_hbase.py
	$(BIN)/python bench/bench_metadata.py
	$(BIN)/python bench/bench_queue.py
	$(BIN)/python bench/bench_subscribe.py
	PYSPARK_PYTHON=$(CURDIR)/$(BIN)/python $(BIN)/python bench/bench_spark.py

clean:
	rm -rf $(VENV) $(DATA) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
