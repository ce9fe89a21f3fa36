# The two commands of README's set-up; each installs what is missing first (scripts/install.sh).
PYTHON ?= python

.PHONY: install first-run test lint

install:
	PYTHON=$(PYTHON) bash scripts/install.sh

# the CPU first run: pretrain (real CIFAR-10 JPEGs, a few minutes on 2 cores), then compare
first-run:
	PYTHON=$(PYTHON) EXTRAS=test bash scripts/install.sh
	PYTHON=$(PYTHON) bash scripts/first_run.sh

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .

# what CI runs (.ci/run): the lint, then the whole suite (DALI's tests included)
test:
	PYTHON=$(PYTHON) EXTRAS=test,dali bash scripts/install.sh
	$(MAKE) lint PYTHON=$(PYTHON)
	$(PYTHON) -m pytest -q
