# Two commands: `make run` (set up, migrate, load the demo, start on :8501 or PORT) and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Where the app listens: this machine only, unless opened (`make run ADDRESS=0.0.0.0`), on
# port 8501 unless told otherwise (`make run PORT=8600`).
ADDRESS ?= 127.0.0.1
PORT    ?= 8501
# The OTLP/HTTP trace receiver beside the app, on this port (`make run RECEIVE=4318`): serve.py
# starts `workbench receive` as its child and stops it with the app (WORKBENCH_RECEIVE_PORT).
RECEIVE ?=

.PHONY: run test soak install lint bench docs guide-shots clean phoenix-env argilla-env labelstudio-env
# How long the 8-process concurrency tests hammer each database: short in `make test` (it must
# stay within 10 minutes on a 2-core machine), long in `make soak` (same tests, no deletion).
CONCURRENCY_SECONDS ?= 15
SOAK_SECONDS ?= 120
SOAK_ROUNDS ?= 10

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# Arize Phoenix, for the live-sync tests (tests/live) and benchmarks/live_sync.py, in its own
# virtual environment: its pinned dependencies clash with the workbench's. Installed once (the
# stamp), again when tools/phoenix/requirements.txt changes: 1 to 2 minutes of pip on a 2-core
# machine (58 s idle, 103 s busy; 49 s CPU) from a local package index. The tests find it at
# .phoenix-venv/bin/phoenix (or WORKBENCH_PHOENIX).
PHOENIX_VENV  := .phoenix-venv
PHOENIX_STAMP := $(PHOENIX_VENV)/.installed

$(PHOENIX_STAMP): tools/phoenix/requirements.txt
	$(PYTHON) -m venv $(PHOENIX_VENV)
	$(PHOENIX_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(PHOENIX_VENV)/bin/python -m pip install --quiet -r tools/phoenix/requirements.txt
	touch $(PHOENIX_STAMP)

phoenix-env: $(PHOENIX_STAMP)

# Argilla's Python client, for the test that loads a fresh export with its from_disk and reads
# back what it exports (tests/labels/test_argilla_export.py) and for tools/argilla_fixtures.py,
# in its own virtual environment (datasets, pyarrow and pandas pinned apart from ours): about a
# minute of pip on a 2-core machine. The test finds it at .argilla-venv/bin/python (or
# ARGILLA_PYTHON) and is skipped without it.
ARGILLA_VENV  := .argilla-venv
ARGILLA_STAMP := $(ARGILLA_VENV)/.installed

$(ARGILLA_STAMP): tools/argilla/requirements.txt
	$(PYTHON) -m venv $(ARGILLA_VENV)
	$(ARGILLA_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(ARGILLA_VENV)/bin/python -m pip install --quiet -r tools/argilla/requirements.txt
	touch $(ARGILLA_STAMP)

argilla-env: $(ARGILLA_STAMP)

# Label Studio, for its round-trip tests (tests/labels/test_labelstudio_live.py) and the script
# that made the committed exports (tools/labelstudio_roundtrip.py), in its own virtual
# environment too (a Django stack the workbench does not need). Installed once (the stamp),
# again when tools/labelstudio/requirements.txt changes: about 2 minutes of pip on a 2-core
# machine (115 s beside another install, 145 s beside a Label Studio round trip).
LABELSTUDIO_VENV  := .labelstudio-venv
LABELSTUDIO_STAMP := $(LABELSTUDIO_VENV)/.installed

$(LABELSTUDIO_STAMP): tools/labelstudio/requirements.txt
	$(PYTHON) -m venv $(LABELSTUDIO_VENV)
	$(LABELSTUDIO_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(LABELSTUDIO_VENV)/bin/python -m pip install --quiet -r tools/labelstudio/requirements.txt
	touch $(LABELSTUDIO_STAMP)

labelstudio-env: $(LABELSTUDIO_STAMP)

run: install
	$(BIN)/workbench migrate
	$(BIN)/workbench seed-demo --if-empty
	$(if $(RECEIVE),WORKBENCH_RECEIVE_PORT=$(RECEIVE) )$(BIN)/python \
		serve.py --server.address $(ADDRESS) --server.port $(PORT) \
		--server.headless true \
		--browser.gatherUsageStats false

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

# The tests run in one worker process per core (pytest-xdist, at most TEST_WORKERS), each
# with its own demo databases and PostgreSQL server. Workers take one test at a time from the
# front of the list, and tests/conftest.py puts the longest modules first, so the workers
# finish together. (One more worker than cores was not faster: every worker builds its own
# demo databases.) The tests that start a Phoenix run on one worker (their xdist_group), so
# each of their modules starts one. The 25 slowest tests are listed at the end.
TEST_WORKERS ?= 4

test: lint phoenix-env argilla-env labelstudio-env
	WORKBENCH_CONCURRENCY_SECONDS=$(CONCURRENCY_SECONDS) $(BIN)/pytest \
		--numprocesses auto --maxprocesses $(TEST_WORKERS) --dist loadgroup --maxschedchunk 1 \
		--durations 25

# The concurrency tests alone, each database hammered for SOAK_SECONDS by 8 processes; then
# the team deployment (two servers and a worker behind haproxy) with its journey SOAK_ROUNDS times.
soak: install
	WORKBENCH_CONCURRENCY_SECONDS=$(SOAK_SECONDS) $(BIN)/pytest tests/storage/test_concurrency.py
	WORKBENCH_TEAM_ROUNDS=$(SOAK_ROUNDS) $(BIN)/pytest tests/deploy

bench: install
	$(BIN)/python benchmarks/run.py

# The documentation site from docs/ (Sphinx with MyST Markdown), on http://127.0.0.1:8000,
# built again as a page is saved. `make test` builds it strictly (tests/test_docs.py).
DOCS_PORT ?= 8000
docs: install
	$(BIN)/sphinx-autobuild docs build/docs --host 127.0.0.1 --port $(DOCS_PORT)

# The role guides' pictures (docs/guides/img), taken by the browser journeys at the steps the
# guides show (tests/helpers/guideshots.py): run after a page changes, look, commit them.
guide-shots: install
	WORKBENCH_GUIDE_SHOTS=docs/guides/img $(BIN)/pytest tests/browser -k "\
		test_label_by_keyboard_and_mouse or test_a_reviewer_adjudicates or \
		test_draw_a_sample_and_record or test_threshold_proposal_to_approval or \
		test_build_a_variant_and_confirm or test_a_new_month_opens or \
		test_a_closed_review_reads or test_an_admin_adds_a_user" -p no:randomly

clean:
	rm -rf $(VENV) $(PHOENIX_VENV) $(ARGILLA_VENV) $(LABELSTUDIO_VENV) .mypy_cache .ruff_cache .pytest_cache
