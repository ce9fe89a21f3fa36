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

# what CI runs (.ci/run): the lint, the whole suite (DALI's tests included; SLURM installed
# where apt-get can, for tests/benchmarks/test_slurm.py), then, on a CPU with AVX-512, the
# entry-point tests once more with oneDNN held to AVX2, as on CPUs without AVX-512, where
# torch 2.12's channels-last convolutions of < 8 channels corrupt memory (docs/hardware.md, "Every CPU")
AVX2_ONLY = DNNL_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2
# one pytest worker per logical CPU (pytest-xdist; "auto" would count physical cores where psutil is
# installed), one torch thread each (tests/conftest.py); a test
# module stays on one worker, so its module fixtures (a tiny finished run) are made once
PYTEST_WORKERS ?= logical
PYTEST_PARALLEL = -n $(PYTEST_WORKERS) --dist loadscope
test:
	PYTHON=$(PYTHON) EXTRAS=test,dali WITH_SLURM=1 bash scripts/install.sh
	$(MAKE) lint PYTHON=$(PYTHON)
	@echo "mvssl suite: pytest from $$(date -u +%H:%M:%S) UTC (the slowest tests are listed before its summary)"
	$(PYTHON) -m pytest -q $(PYTEST_PARALLEL) --durations=15
	@if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then \
		echo "mvssl suite: the AVX2 rerun from $$(date -u +%H:%M:%S) UTC"; \
		$(AVX2_ONLY) $(PYTHON) -m pytest -q $(PYTEST_PARALLEL) tests/cli/test_entry_points.py tests/config/test_hardware.py; \
	else \
		echo "mvssl suite: no AVX2 rerun: this CPU has no AVX-512, so the suite above ran at AVX2"; \
	fi
	@echo "mvssl suite: done at $$(date -u +%H:%M:%S) UTC"
