# Punctual — the usual loop. Every target installs what it needs into .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The console's browser tests (tests/e2e/test_console.py) drive Debian's chromium through its
# chromedriver: `make test` installs them where missing, never a browser that a library downloads.
BROWSER := /usr/bin/chromium /usr/bin/chromedriver
# Bytecode caches, even where the environment turns them off: every test worker and every local stack
# a test starts would otherwise compile (and pytest rewrite) the same modules again.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install run test unit lint format synth deploy destroy clean

# Installs report on stderr: a benchmark's standard output is its JSON alone, on a fresh clone too.
# The first run takes a minute or two: each step says what it does, so that a silent wait is not
# taken for a hang.
$(STAMP): pyproject.toml
	@echo "installing Punctual and its tools into $(VENV) (once; again only when pyproject.toml changes)" >&2
	@echo "  1/3 creating the virtual environment" >&2
	@$(PYTHON) -m venv $(VENV) >&2
	@echo "  2/3 updating pip" >&2
	@$(BIN)/pip install --quiet --upgrade pip >&2
	@echo "  3/3 installing punctual with its dev and infra tools (boto3, moto, pytest, the AWS CDK: about a minute)" >&2
	@$(BIN)/pip install --quiet -e '.[dev,infra]' >&2
	@echo "installed" >&2
	@touch $(STAMP)

install: $(STAMP)

# The local stack; options through LOCAL_ARGS, e.g. make run LOCAL_ARGS="--tick-seconds 5 --reset"
run: $(STAMP)
	$(BIN)/punctual local $(LOCAL_ARGS)

# Four test processes on two cores (the end-to-end tests mostly wait on the clock: four end the suite
# sooner than three here), given whole files, the long ones first (tests/conftest.py), so that each
# file's fixtures are built once. mypy checks beside them, in the cores' idle moments, instead of
# holding them up for a quarter of a minute: its report follows the tests', and either failing fails
# the target.
test: $(STAMP) $(BROWSER)
	$(BIN)/ruff check .
	report=$$(mktemp); $(BIN)/mypy >$$report 2>&1 & typing=$$!; \
	PUNCTUAL_REQUIRE_BROWSER=1 $(BIN)/pytest -n 4 --dist loadfile --no-loadscope-reorder -q; tests=$$?; \
	wait $$typing; typed=$$?; echo "mypy:"; cat $$report; rm -f $$report; \
	[ $$tests -eq 0 ] && [ $$typed -eq 0 ]

$(BROWSER):
	@echo "installing chromium and chromium-driver (apt-get)" >&2
	@DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null 2>&1 \
		|| { DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null \
		&& DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null; }

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) cdk.out .pytest_cache .mypy_cache .ruff_cache

# AWS deployment (CDK). Pass options through CDK_ARGS, e.g.
#   make deploy CDK_ARGS="-c alarm_email=ops@example.com -c deletion_protection=false"
CDK := npx --no-install cdk
CDK_ARGS ?=
NODE_STAMP := node_modules/.package-lock.json

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund

synth: $(STAMP) $(NODE_STAMP)
	$(CDK) synth --quiet $(CDK_ARGS)

deploy: $(STAMP) $(NODE_STAMP)
	$(CDK) deploy $(CDK_ARGS)

destroy: $(STAMP) $(NODE_STAMP)
	$(CDK) destroy $(CDK_ARGS)

# Benchmarks: each prints JSON; not part of `make test`. docs/benchmarks.md has their latest figures.
# Options through BENCH_ARGS, e.g. make bench-scanner BENCH_ARGS="--markers 5000 --group-markers 0"
.PHONY: bench-scanner bench-cost bench-burst
bench-scanner: $(STAMP)
	@$(BIN)/python -m bench.scanner_throughput $(BENCH_ARGS)

# Benchmark 4: a model of the deployed pipeline under a burst (AWS's documented scaling rules, the
# scanner's measured rate); seconds. BENCH_ARGS="--measure-scanner" measures that rate first.
bench-burst: $(STAMP)
	@$(BIN)/python -m bench.burst $(BENCH_ARGS)

# A pack's fire stage from one process on loopback: 1,000 and 500 webhooks on the worker's pool, CPU.
.PHONY: bench-pack-fire
bench-pack-fire: $(STAMP)
	@$(BIN)/python -m bench.pack_fire $(BENCH_ARGS)

bench-cost: $(STAMP)
	@$(BIN)/python -m bench.cost $(BENCH_ARGS)

# Benchmark 1: precision end to end on the local stack under a burst, cron at :00 and steady load (about
# 6 minutes at the defaults; prints the machine's calibration too); draws docs/lateness.png. Options through BENCH_ARGS.
BENCH_STAMP := $(VENV)/.bench-installed

$(BENCH_STAMP): $(STAMP)
	@echo "installing the benchmarks' extras" >&2
	@$(BIN)/pip install -q -e '.[bench]' >&2
	@touch $(BENCH_STAMP)

.PHONY: bench-precision
bench-precision: $(BENCH_STAMP)
	@$(BIN)/python -m bench.precision --png docs/lateness.png $(BENCH_ARGS)

# The local stack's durable store at 100,000 jobs: start time, memory, the journal's cost per
# request, compaction time and precision while it runs. A few minutes. Options through BENCH_ARGS.
.PHONY: bench-local-store
bench-local-store: $(BENCH_STAMP)
	@$(BIN)/python -m bench.local_store $(BENCH_ARGS)
