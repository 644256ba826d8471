# Development entry points. `make test` on a fresh clone creates .venv first (a few minutes).
#   make venv   create/update the venv: dependencies, messages, editable install (scripts/setup_venv.sh)
#   make demo   run the embedded demo: <venv>/bin/inertial-id demo $(ARGS)
#   make test   run the test suite with the venv's python
#   make lint   ruff check .
#   make clean  remove the builds and venvs of both distributions
#
# ROS 2 distribution: Kilted by default (.venv, build/); `make venv ROS_DISTRO=jazzy` (and
# `make test ROS_DISTRO=jazzy`, ...) uses a second environment of Jazzy wheels (.venv-jazzy,
# build-jazzy/). Only a ROS_DISTRO given on the command line counts: the one a sourced ROS 2
# install exports does not pick the environment.

ifeq ($(origin ROS_DISTRO),command line)
DISTRO := $(ROS_DISTRO)
else
DISTRO := kilted
endif
ifeq ($(DISTRO),kilted)
VENV := .venv
else ifeq ($(DISTRO),jazzy)
VENV := .venv-jazzy
else
$(error ROS_DISTRO=$(DISTRO): use kilted or jazzy)
endif

STAMP := $(VENV)/.inertial_id_ready
ARGS  ?=

# Inputs of the set-up: the script re-runs only the steps whose inputs changed.
SETUP_INPUTS := scripts/setup_venv.sh requirements.txt requirements-$(DISTRO).txt \
                requirements-dev.txt constraints-$(DISTRO).txt CMakeLists.txt \
                package.xml $(wildcard msg/*.msg) $(wildcard action/*.action) setup.py pyproject.toml

# Tests: DDS discovery on this host only, and a domain id per run (unless given) so that
# parallel runs on one machine do not see each other's topics. $$$$ is the recipe shell's PID.
TEST_ENV = ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST OMP_NUM_THREADS=1 \
           ROS_DOMAIN_ID=$${ROS_DOMAIN_ID:-$$(( $$$$ % 100 + 1 ))}

.PHONY: venv demo test lint clean

venv: $(STAMP)

$(STAMP): $(SETUP_INPUTS)
	bash scripts/setup_venv.sh --distro $(DISTRO)

demo: $(STAMP)
	$(VENV)/bin/inertial-id demo $(ARGS)

# The venv's own python: the ROS wheels re-launch it once to set the library path.
test: $(STAMP)
	$(TEST_ENV) $(VENV)/bin/python -m pytest -q --durations=15 test

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf build build-jazzy .venv .venv-jazzy
