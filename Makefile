# seedfleet: the two set-up commands are `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PROTO_SRC := proto/seedfleet/v1/actor_learner.proto
# The embedded default of `make run` (`make run SEED=1` for another seed); `make run ARGS="..."` replaces it.
SEED ?= 0
RUN_DEFAULT := --env CartPole-v1 --algo vtrace --target-return 475 --max-frames 20000000 \
	--seed $(SEED) --logdir runs/cartpole-seed$(SEED)

.PHONY: install proto test run learner actor lint clean

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

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) build *.egg-info
