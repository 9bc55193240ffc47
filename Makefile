# The two commands of the README: `make run` (the demo campaign) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SNAKEMAKE := $(BIN)/snakemake
# A real S3 server for the tests, built from the Go module proxy (pinned; ~3-10 min once).
MINIO_MODULE := github.com/minio/minio@v0.0.0-20260212201848-7aac2a2c5b7c
MINIO := .cache/bin/minio

.PHONY: run test lint unit bench bytecode system-packages test-packages s3-server lab lab-stop clean

run: $(VENV)/.installed bytecode system-packages
	$(SNAKEMAKE)
	@echo "report: reports/demo/index.html"

test: $(VENV)/.installed-test bytecode test-packages s3-server lint
	$(BIN)/pytest -q

# Unit tests alone (no Snakemake DAGs, sshd hosts, MinIO or browser): under a minute.
unit: $(VENV)/.installed-test bytecode
	$(BIN)/pytest -q -n 2 -m "not workflow and not ssh and not s3 and not browser"

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/snakefmt --check .
	$(SNAKEMAKE) --lint

# The service benchmarks start sshd lab hosts (tests/sshd.py), so bench needs the test packages.
bench: $(VENV)/.installed-test bytecode test-packages envs/requirements-bench.txt
	$(BIN)/pip install -q -r envs/requirements-bench.txt
	$(BIN)/python bench/run_all.py

# Four sshd on 127.0.0.2-5:2200 as stand-in client hosts for config/examples/*-loopback.yaml.
lab: $(VENV)/.installed-test test-packages
	$(BIN)/python -m tests.lab start --hosts 4

lab-stop:
	$(BIN)/python -m tests.lab stop

system-packages:
	@envs/install-system-packages.sh fio:fio chromium:chromium

test-packages:
	@envs/install-system-packages.sh fio:fio sshd:openssh-server ssh-keygen:openssh-client pgrep:procps iperf3:iperf3 chromium:chromium chromedriver:chromium-driver pdftoppm:poppler-utils

# Without Go the S3 tests skip and say why; with Go, MinIO is built once into .cache/bin.
s3-server:
	@if [ -x $(MINIO) ]; then :; \
	elif command -v go >/dev/null; then \
		echo "building MinIO ($(MINIO_MODULE)) for the S3 tests"; \
		GOBIN=$(CURDIR)/.cache/bin GOFLAGS=-mod=mod go install $(MINIO_MODULE) \
			|| echo "MinIO did not build: the S3 tests will be skipped (pytest -ra names them)"; \
	else echo "no Go toolchain: the S3 tests against MinIO will be skipped"; fi

# Every job of a campaign is a Python process importing storbench (installed editable, so
# not byte-compiled by pip); with PYTHONDONTWRITEBYTECODE set, each would compile it again
# (about 40 ms a job). compileall only compiles what changed.
bytecode: $(VENV)/.installed
	@$(BIN)/python -m compileall -q storbench

LOGGER_PLUGIN = plugins/snakemake-logger-plugin-storbench
$(VENV)/.installed: envs/requirements.txt pyproject.toml $(wildcard $(LOGGER_PLUGIN)/*.toml $(LOGGER_PLUGIN)/*/*.py)
	@# Debian's python3 ships venv without ensurepip; the pseudo-command forces the install
	@$(PYTHON) -c 'import ensurepip' 2>/dev/null || envs/install-system-packages.sh no-ensurepip:python3-venv
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -r envs/requirements.txt
	$(BIN)/pip install -q --no-deps -e .
	@# not editable: Snakemake finds logger plugins with pkgutil, which misses editable installs
	$(BIN)/pip install -q --no-deps ./$(LOGGER_PLUGIN)
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed envs/requirements-test.txt
	$(BIN)/pip install -q -r envs/requirements-test.txt
	touch $@

clean:
	rm -rf results/*/ reports/*/ .snakemake
