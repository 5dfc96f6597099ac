# seedfleet: the two set-up commands are `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PROTO_SRC := proto/seedfleet/v1/actor_learner.proto
# The embedded default of `make run` (`make run SEED=1` for another seed); `make run ARGS="..."` replaces it.
SEED ?= 0
RUN_DEFAULT := --env CartPole-v1 --algo vtrace --target-return 475 --max-frames 20000000 \
	--seed $(SEED) --logdir runs/cartpole-seed$(SEED) --fresh

# `make bench`: the Pong default three times, a sweep over actor counts, then BENCHMARKS.md.
BENCH_ARGS ?= --env ALE/Pong-v5 --actors 4 --envs-per-actor 64 --env-threads 1 --seconds 30
BENCH_SWEEP ?= 1,2,4,8
BENCH_DIR := runs/bench

.PHONY: install proto test run learner actor lint clean bench

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[learner,dev]"
	touch $(STAMP)

install: $(STAMP)

# The one generator command for the wire code (seedfleet/v1/*_pb2*.py).
proto: $(STAMP)
	$(PY) -m grpc_tools.protoc -Iproto --python_out=. --pyi_out=. --grpc_python_out=. $(PROTO_SRC)

test: $(STAMP)
	$(PY) -m pytest -q

run: $(STAMP)
	$(VENV)/bin/seedfleet run $(or $(ARGS),$(RUN_DEFAULT))

learner: $(STAMP)
	$(VENV)/bin/seedfleet learner $(ARGS)

actor: $(STAMP)
	$(VENV)/bin/seedfleet actor $(ARGS)

bench: $(STAMP)
	mkdir -p $(BENCH_DIR)
	for i in 1 2 3; do $(VENV)/bin/seedfleet bench $(BENCH_ARGS) --json $(BENCH_DIR)/run$$i.json || exit 1; done
	$(VENV)/bin/seedfleet bench $(BENCH_ARGS) --mode env --sweep-actors $(BENCH_SWEEP) \
		--json $(BENCH_DIR)/sweep.json --plot BENCHMARKS-sweep.png
	$(PY) -m bench.report BENCHMARKS.md --runs $(BENCH_DIR)/run1.json $(BENCH_DIR)/run2.json \
		$(BENCH_DIR)/run3.json --sweep $(BENCH_DIR)/sweep.json --plot BENCHMARKS-sweep.png

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) build *.egg-info
