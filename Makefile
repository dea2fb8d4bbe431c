# Two entry points: `make run` (the embedded default) and `make test` (the whole suite).
# Everything else is a step of those two, but `make test-unit` (the tests that need no
# server and no Java, in seconds) and `make bench`.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
DATA   ?= .hqueue-data
HOST   ?= 127.0.0.1
PORT   ?= 9090
METRICS_PORT ?= 9464
ZK_JAR := /usr/share/java/zookeeper.jar
# Apache HBase for `make run-hbase` and the suite's real cluster: its published jars,
# resolved by docker/hbase/pom.xml into the local Maven repository (~/.m2 keeps them),
# the class path written to build/hbase/ (git-ignored). HBASE_VERSION=2.5.8 runs the
# older line; the ports are run-hbase's.
HBASE_VERSION ?= 2.6.1
HBASE_CLASSPATH_FILE := $(CURDIR)/build/hbase/classpath-$(HBASE_VERSION).txt
HBASE_DATA ?= .hqueue-hbase
ZOOKEEPER_PORT ?= 2181
THRIFT1_PORT ?= 9090
THRIFT2_PORT ?= 9091
SIDECAR_PORTS ?= 9092,9093
MASTER_PORT ?= 16000
REGIONSERVER_PORTS ?= 16020,16021
DIST   ?= dist
# Per checkout (build/ is git-ignored), so that two checkouts on one machine do not
# share it; removed after a run that passed, kept after one that failed.
SMOKE_VENV ?= $(CURDIR)/build/smoke-venv

# chaos: every fault scenario at full size (hqueue.testing.chaos; root, for network namespaces).
.PHONY: chaos run run-hbase hbase-classpath spark-avro test venv deps-test zookeeper crosslang-deps compose-config lint staged typecheck imports pytest test-unit wheel smoke bench clean

run: $(BIN)/hqueue
	$(BIN)/hqueue standalone --data-dir $(DATA) --host $(HOST) --port $(PORT) --metrics-port $(METRICS_PORT)

# hqueue on a real Apache HBase on this machine: ZooKeeper, a master, two region servers,
# both Thrift gateways (each a JVM) and a sidecar beside each region server; one ready
# line, Ctrl-C stops it all (docs/deploy.md).
run-hbase: $(BIN)/hqueue zookeeper hbase-classpath
	HQUEUE_HBASE_CLASSPATH_FILE=$(HBASE_CLASSPATH_FILE) $(BIN)/python -m hqueue.testing.run_hbase \
	  --data-dir $(HBASE_DATA) --hbase-version $(HBASE_VERSION) --zookeeper-port $(ZOOKEEPER_PORT) \
	  --thrift1-port $(THRIFT1_PORT) --thrift2-port $(THRIFT2_PORT) --sidecar-ports $(SIDECAR_PORTS) \
	  --master-port $(MASTER_PORT) --regionserver-ports $(REGIONSERVER_PORTS)

hbase-classpath: $(HBASE_CLASSPATH_FILE)

$(HBASE_CLASSPATH_FILE): docker/hbase/pom.xml
	@mkdir -p $(dir $@)
	@echo "resolving Apache HBase $(HBASE_VERSION) from Maven Central"
	mvn -q -B -f docker/hbase/pom.xml -Dhbase.version=$(HBASE_VERSION) \
	  dependency:build-classpath -Dmdep.outputFile=$@.tmp
	mv $@.tmp $@

# Spark's Avro functions, for hqueue.spark.read_avro (docs/spark.md): the spark-avro
# package from Maven Central, copied into build/spark/ (git-ignored). A Spark should
# run its own version; the Maven repository this project builds from serves none for
# PySpark 4.3.0, so 4.2.0 is pinned, which the tests show working on Spark 4.3.
# SPARK_AVRO_VERSION picks another.
SPARK_AVRO_VERSION ?= 4.2.0
SPARK_AVRO_JAR := $(CURDIR)/build/spark/spark-avro_2.13-$(SPARK_AVRO_VERSION).jar

spark-avro: $(SPARK_AVRO_JAR)

$(SPARK_AVRO_JAR):
	@echo "resolving Spark's Avro functions $(SPARK_AVRO_VERSION) from Maven Central"
	rm -rf $(dir $@)tmp && mkdir -p $(dir $@)tmp
	mvn -q -B org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy \
	  -Dartifact=org.apache.spark:spark-avro_2.13:$(SPARK_AVRO_VERSION) -DoutputDirectory=$(dir $@)tmp
	mv $(dir $@)tmp/$(notdir $@) $@ && rm -rf $(dir $@)tmp

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

# The cross-language test (tests/crosslang) and docs/clients.md: Debian's Thrift compiler
# generates a Node.js client from the IDLs; npm's thrift runs it, from build/node
# (git-ignored). Node.js and npm are taken as the machine has them.
NODE_DIR := build/node
crosslang-deps:
	@if ! command -v thrift >/dev/null; then \
	  echo "installing Debian's thrift-compiler package"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q thrift-compiler >/dev/null || \
	  (apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q thrift-compiler >/dev/null); \
	fi
	@if [ ! -d $(NODE_DIR)/node_modules/thrift ]; then \
	  echo "installing npm's thrift into $(NODE_DIR)"; \
	  mkdir -p $(NODE_DIR) && npm install --prefix $(NODE_DIR) --silent --no-audit --no-fund thrift@0.17.0; \
	fi

# docker/compose.yml checked by Debian's docker-compose (`config`: the file parses and
# every service, port, volume and profile is valid); no Docker engine is needed or run.
compose-config:
	@if ! command -v docker-compose >/dev/null; then \
	  echo "installing Debian's docker-compose package"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker-compose >/dev/null || \
	  (apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker-compose >/dev/null); \
	fi
	docker-compose -f docker/compose.yml config --quiet
	docker-compose -f docker/compose.yml --profile standalone config --quiet

# mypy and the import checks read the package as the wheel lays it out: setup.cfg's
# package_dir maps sidecar/, spark_jobs/, thrift/ and schemas/ into hqueue, which no
# checker follows from the source tree, so setuptools' own build_py copies the package
# to $(STAGED) first. mypy's paths are mapped back to the files to edit.
STAGED := build/lint

staged: deps-test
	rm -rf $(STAGED)
	$(BIN)/python -c "from setuptools import setup; setup()" -q build_py --build-lib $(STAGED) 2>/dev/null

typecheck: staged
	cd $(STAGED) && bash -o pipefail -c '$(CURDIR)/$(BIN)/mypy --config-file $(CURDIR)/pyproject.toml \
	  --cache-dir $(CURDIR)/.mypy_cache/$(notdir $(STAGED)) | sed -E "s#^hqueue/(sidecar|spark_jobs)/#\1/#"'

imports: staged
	cd $(STAGED) && PYTHONPATH=. $(CURDIR)/$(BIN)/lint-imports --config $(CURDIR)/.importlinter
	cd $(STAGED) && PYTHONPATH=. $(CURDIR)/$(BIN)/python $(CURDIR)/.ci/check_cycles.py

lint: deps-test
	$(MAKE) --no-print-directory compose-config
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(MAKE) --no-print-directory typecheck imports

# Three workers (pytest-xdist), a test module each at a time, so that a module's
# fixtures start once; each worker starts its own session servers. The modules that
# start clusters of their own run on one worker, one after another, from the start
# (tests/conftest.py: OWN_CLUSTERS), so that no two such clusters share the cores.
# PYTEST_WORKERS=0
# runs the suite in one process. On 2 cores, two workers left the machine idle 23% of
# the time (tests waiting on servers, faults and timeouts): a third took the suite from
# 22.3 to 19.1 minutes on 2026-11-29.
PYTEST_WORKERS ?= 3
pytest: deps-test zookeeper crosslang-deps hbase-classpath spark-avro
	HQUEUE_HBASE_CLASSPATH_FILE=$(HBASE_CLASSPATH_FILE) HQUEUE_SPARK_AVRO_JAR=$(SPARK_AVRO_JAR) \
	PYSPARK_PYTHON=$(CURDIR)/$(BIN)/python $(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadfile --durations=15

# The tests that need no server and no Java (marked `unit` by tests/conftest.py): seconds.
test-unit: deps-test
	$(BIN)/pytest -q -m unit

# The wheel users install, built as pip builds it.
wheel: $(BIN)/hqueue
	rm -rf $(DIST)
	$(BIN)/pip wheel --quiet --no-deps --wheel-dir $(DIST) .

# The installed-wheel smoke test: a fresh virtual environment (not the checkout's)
# holding only the wheel, `hqueue standalone` up, put, scan, subscribe, a Spark read.
smoke: wheel
	rm -rf $(SMOKE_VENV)
	$(PYTHON) -m venv $(SMOKE_VENV)
	$(SMOKE_VENV)/bin/pip install --quiet --upgrade pip
	$(SMOKE_VENV)/bin/pip install --quiet "$$(echo $(CURDIR)/$(DIST)/hqueue-*.whl)[spark]"
	cp .ci/smoke_wheel.py $(SMOKE_VENV)/smoke_wheel.py
	cd $(SMOKE_VENV) && ./bin/python smoke_wheel.py
	rm -rf $(SMOKE_VENV)

test: lint pytest bench-smoke smoke

# The queue benchmark's peers, run from Debian's packages (bench/peers.py starts them).
.PHONY: bench-deps
bench-deps:
	@if [ ! -x /usr/bin/redis-server ] || [ ! -x /usr/sbin/nats-server ]; then \
	  echo "installing Debian's redis-server and nats-server packages"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server nats-server >/dev/null || \
	  (apt-get update -q >/dev/null && \
	   DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server nats-server >/dev/null); \
	fi

chaos: deps-test zookeeper
	$(BIN)/python -m hqueue.testing.chaos --size full

bench: export HQUEUE_HBASE_CLASSPATH_FILE := $(HBASE_CLASSPATH_FILE)
bench: export HQUEUE_SPARK_AVRO_JAR := $(SPARK_AVRO_JAR)
bench: deps-test bench-deps zookeeper hbase-classpath spark-avro
	$(BIN)/python bench/bench_cli.py
	$(BIN)/python bench/bench_hbase.py
	$(BIN)/python bench/bench_metadata.py
	$(BIN)/python bench/bench_metadata_scale.py
	$(BIN)/python bench/bench_queue.py
	$(BIN)/python bench/bench_records.py
	$(BIN)/python bench/bench_subscribe.py
	PYSPARK_PYTHON=$(CURDIR)/$(BIN)/python $(BIN)/python bench/bench_spark.py

# Every script in bench/ at tiny sizes (`--smoke`: seconds each, the peers included), so
# that a broken benchmark fails `make test`; each prints its tables, headed "SMOKE RUN"
# and judging no target. tests/test_bench_listed.py checks that every script is here.
# Four at a time, the longest first (.ci/parallel.py prints each one's output whole
# when it ends): they mostly wait on the servers they start (two at a time took 133 s,
# four 106 s).
BENCH_SMOKE_JOBS ?= 4
.PHONY: bench-smoke
bench-smoke: export HQUEUE_HBASE_CLASSPATH_FILE := $(HBASE_CLASSPATH_FILE)
bench-smoke: export PYSPARK_PYTHON := $(CURDIR)/$(BIN)/python
bench-smoke: export HQUEUE_SPARK_AVRO_JAR := $(SPARK_AVRO_JAR)
bench-smoke: deps-test bench-deps zookeeper hbase-classpath spark-avro
	$(BIN)/python .ci/parallel.py --jobs $(BENCH_SMOKE_JOBS) \
	"$(BIN)/python bench/bench_subscribe.py --smoke" \
	"$(BIN)/python bench/bench_spark.py --smoke" \
	"$(BIN)/python bench/bench_queue.py --smoke" \
	"$(BIN)/python bench/bench_metadata.py --smoke" \
	"$(BIN)/python bench/bench_hbase.py --smoke" \
	"$(BIN)/python bench/bench_admin.py --smoke" \
	"$(BIN)/python bench/bench_metadata_scale.py --smoke" \
	"$(BIN)/python bench/soak_model.py --smoke" \
	"$(BIN)/python bench/bench_records.py --smoke" \
	"$(BIN)/python bench/soak_requests.py --smoke" \
	"$(BIN)/python bench/bench_cli.py --smoke"

clean:
	rm -rf $(VENV) $(DATA) $(HBASE_DATA) $(DIST) $(SMOKE_VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
