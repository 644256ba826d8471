# Development entry points. `make test` on a fresh clone creates .venv first (a few minutes).
#   make venv   create/update .venv: dependencies, messages, editable install (scripts/setup_venv.sh)
#   make demo   run the embedded demo: .venv/bin/inertial-id demo $(ARGS)
#   make test   run the test suite with the venv's python
#   make lint   ruff check .
#   make clean  remove build/ and .venv/

VENV  := .venv
STAMP := $(VENV)/.inertial_id_ready
ARGS  ?=

# Inputs of the set-up: the script re-runs only the steps whose inputs changed.
SETUP_INPUTS := scripts/setup_venv.sh requirements.txt requirements-dev.txt constraints.txt \
                CMakeLists.txt \
                package.xml $(wildcard msg/*.msg) setup.py pyproject.toml

# Tests: DDS discovery on this host only, and a domain id per run (unless given) so that
# parallel runs on one machine do not see each other's topics. $$$$ is the recipe shell's PID.
TEST_ENV = ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST OMP_NUM_THREADS=1 \
           ROS_DOMAIN_ID=$${ROS_DOMAIN_ID:-$$(( $$$$ % 100 + 1 ))}

.PHONY: venv demo test lint clean

venv: $(STAMP)

$(STAMP): $(SETUP_INPUTS)
	bash scripts/setup_venv.sh

demo: $(STAMP)
	$(VENV)/bin/inertial-id demo $(ARGS)

# The venv's own python: the ROS wheels re-launch it once to set the library path.
test: $(STAMP)
	$(TEST_ENV) $(VENV)/bin/python -m pytest -q test

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf build $(VENV)
