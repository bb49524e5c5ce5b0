# The README's two commands: `make demo` (a real query on real data) and `make test` (the suite).
# Both create or reuse .venv and install what they need, including Java 17 for Spark tests.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup java demo test lint bench

setup: $(VENV)/.installed

# The demo needs only the core package (pyarrow, numpy, click); the tests need every extra.
$(VENV)/.core: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV) || { \
	  echo "venv failed: installing python3-venv"; rm -rf $(VENV); \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null \
	  && $(PYTHON) -m venv $(VENV); }
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.installed: pyproject.toml $(VENV)/.core
	$(PY) -m pip install -q -e ".[dev,spark]"
	touch $@

java:
	@command -v java >/dev/null 2>&1 || { \
	  echo "java not found: installing OpenJDK 17 (needed by the Spark tests)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null; }

# The demo also draws the matches as a timeline PNG when matplotlib is installed (the plot
# extra: pip install -e ".[plot]"); with the core install alone it says so and skips it.
DEMO_PLOT ?= out/demo_timeline.png

demo: $(VENV)/.core
	@mkdir -p $(dir $(DEMO_PLOT))
	@if $(PY) -c "import matplotlib" 2>/dev/null; then \
	  plot="--plot $(DEMO_PLOT)"; \
	else \
	  plot=""; echo "note: matplotlib is not installed (pip install -e '.[plot]'): no timeline picture" >&2; \
	fi; \
	$(VENV)/bin/kleene run examples/flight_delay_propagation.kleene \
	  --input examples/data/nycflights13_sample.csv.gz --time-col dep_time_utc --event-type Flight \
	  $$plot

test: setup java
	$(PY) -m pytest -q -p no:cacheprovider

lint: setup
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

bench: setup
	$(PY) -m benchmarks
