# super_sac developer commands. Everything runs inside a project-local virtual environment.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# CPU build of PyTorch: the local "+cpu" wheel where one is available, else PyTorch's CPU index.
TORCH_VERSION ?= 2.13.0
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu

.PHONY: setup setup-bench demo test lint format bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -c "import torch" 2>/dev/null \
		|| $(PY) -m pip install --quiet "torch==$(TORCH_VERSION)+cpu" \
		|| $(PY) -m pip install --quiet torch --index-url $(TORCH_CPU_INDEX)
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(STAMP)

## setup: create .venv with a CPU PyTorch and super_sac (editable) plus the test tools
setup: $(STAMP)

## setup-bench: add stable-baselines3, MuJoCo, Minari and d3rlpy for the benchmarks
setup-bench: $(STAMP)
	$(PY) -m pip install --quiet -e ".[sb3,mujoco,offline,d3rlpy-deps]"
	$(PY) -m pip install --quiet --no-deps "d3rlpy==2.8.1"

## demo: a short SAC run on Pendulum-v1 that prints its evaluation return and log folder
demo: $(STAMP)
	$(PY) experiments/gym/train_gym.py --env Pendulum-v1 --config sac.gin --steps 6000 \
		--seed 0 --name demo --gin_bindings "super_sac.eval_interval = 2000"

## test: lint and the default (fast) test suite
test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m pytest -q

lint: $(STAMP)
	$(PY) -m ruff check .

format: $(STAMP)
	$(PY) -m ruff format super_sac tests experiments

## bench: the learning and throughput benchmarks (tens of minutes)
bench: setup-bench
	$(PY) experiments/benchmarks/throughput.py
	$(PY) experiments/benchmarks/pendulum_learning.py

clean:
	rm -rf $(VENV) saves .pytest_cache .ruff_cache *.egg-info
