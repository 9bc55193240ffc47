# The two commands of the README: `make run` (the demo campaign) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SNAKEMAKE := $(BIN)/snakemake

.PHONY: run test lint unit bench system-packages test-packages clean

run: $(VENV)/.installed system-packages
	$(SNAKEMAKE)
	@echo "report: reports/demo/index.html"

test: $(VENV)/.installed-test test-packages lint
	$(BIN)/pytest -q

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/snakefmt --check .
	$(SNAKEMAKE) --lint

bench: $(VENV)/.installed system-packages
	$(BIN)/python bench/run_all.py

system-packages:
	@envs/install-system-packages.sh fio:fio

test-packages:
	@envs/install-system-packages.sh fio:fio sshd:openssh-server ssh-keygen:openssh-client pgrep:procps

$(VENV)/.installed: envs/requirements.txt pyproject.toml
	@# Debian's python3 ships venv without ensurepip; the pseudo-command forces the install
	@$(PYTHON) -c 'import ensurepip' 2>/dev/null || envs/install-system-packages.sh no-ensurepip:python3-venv
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -r envs/requirements.txt
	$(BIN)/pip install -q --no-deps -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed envs/requirements-test.txt
	$(BIN)/pip install -q -r envs/requirements-test.txt
	touch $@

clean:
	rm -rf results/*/ reports/*/ .snakemake
