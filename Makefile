# The two commands: `make run` and `make test`. Both set up what they need.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
REPO ?= model_repository
ARGS ?=

.PHONY: run test lint bench demo-models check clean

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -e '.[cpu,test]'
	touch $(STAMP)

demo-models: $(STAMP)
	$(PY) scripts/build_demo_repository.py $(REPO)

# etc/demo.yaml adds a synthetic road stream through lane_pipeline: lanes
# flow in the log with no camera. ARGS may override it (--config FILE).
run: demo-models
	$(VENV)/bin/edgebox serve --config etc/demo.yaml --model-repository $(REPO) $(ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check edgebox tests bench scripts

test: $(STAMP) lint
	$(PY) -m pytest -q

bench: demo-models
	$(PY) -m pip install -q -r bench/requirements.txt
	$(PY) bench/run.py

check: demo-models
	$(VENV)/bin/edgebox check $(REPO)

clean:
	rm -rf $(VENV) build dist *.egg-info bench/out
