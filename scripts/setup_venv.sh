#!/usr/bin/env bash
# Create or update a development virtual environment of inertial_id for one ROS 2 distribution:
# .venv for Kilted (the default), .venv-jazzy for Jazzy.
#
# Needs only python3 (3.10-3.12, with its C headers), cmake (>= 3.20) and a C/C++ compiler.
# Everything is installed under the repository: the venv (ROS 2 and the other dependencies from
# PyPI wheels, this package's messages, this package in editable mode) and build/ or
# build-jazzy/ (the CMake build of the messages against that venv's ROS).
#
# Steps, each re-run only when its inputs changed (their hashes are kept in the stamp file
# <venv>/.inertial_id_ready):
#   1. python3 -m venv <venv>
#   2. pip install requirements.txt + requirements-<distro>.txt + requirements-dev.txt
#      (constraints-<distro>.txt), then patch the wheels' CMake files
#   3. configure, build and install the messages (CMakeLists.txt, package.xml, msg/*.msg)
#   4. pip install --no-deps -e . (setup.py, pyproject.toml)
# Running it again with nothing changed does nothing. The two environments are independent:
# the source tree is installed in editable mode into both, the messages are built for each.
# Usage: scripts/setup_venv.sh [--force] [--distro kilted|jazzy]
#        (INERTIAL_ID_PYTHON=python3.12 picks another Python)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"
FORCE=0
DISTRO=kilted
while [[ $# -gt 0 ]]; do
  case "$1" in
    --force) FORCE=1 ;;
    --distro) DISTRO="${2:-}"; shift ;;
    --distro=*) DISTRO="${1#--distro=}" ;;
    *) printf '[setup_venv] ERROR: unknown argument %s\n' "$1" >&2; exit 2 ;;
  esac
  shift
done
case "$DISTRO" in
  kilted) VENV="$ROOT/.venv"; BUILD="$ROOT/build" ;;
  jazzy) VENV="$ROOT/.venv-jazzy"; BUILD="$ROOT/build-jazzy" ;;
  *) printf '[setup_venv] ERROR: ROS distribution %s: use kilted or jazzy\n' "$DISTRO" >&2
     exit 2 ;;
esac
REQ_ROS="requirements-$DISTRO.txt"
CONSTRAINTS="constraints-$DISTRO.txt"
STAMP="$VENV/.inertial_id_ready"
LOGDIR="$VENV/setup-logs"
PY="$VENV/bin/python"
BASE_PYTHON="${INERTIAL_ID_PYTHON:-python3}"

say() { printf '[setup_venv %s] %s\n' "$DISTRO" "$*"; }
die() { printf '[setup_venv] ERROR: %s\n' "$*" >&2; exit 1; }

# run LOGNAME CMD...: run a command with its output in a log file; show the log's end on failure.
run() {
  local log="$LOGDIR/$1.log"
  shift
  if ! "$@" >"$log" 2>&1; then
    printf '[setup_venv] FAILED: %s\n[setup_venv] last lines of %s:\n' "$*" "${log#"$ROOT"/}" >&2
    tail -n 40 "$log" >&2
    exit 1
  fi
}

# hash_of ITEMS...: one hash over the named files (name and content) and literal strings.
hash_of() {
  local item
  for item in "$@"; do
    if [[ -f "$item" ]]; then sha256sum "$item"; else printf '%s\n' "$item"; fi
  done | sha256sum | cut -d' ' -f1
}

# --- 0. tools -------------------------------------------------------------------------------
command -v "$BASE_PYTHON" >/dev/null || die "$BASE_PYTHON not found"
command -v cmake >/dev/null || die "cmake not found (>= 3.20 is needed to build the messages)"
"$BASE_PYTHON" - <<'EOF' || die "Python 3.10-3.12 is needed (the ROS 2 wheels exist for cp310-cp312)"
import sys
sys.exit(0 if (3, 10) <= sys.version_info[:2] <= (3, 12) else 1)
EOF

# --- 1. the venv ----------------------------------------------------------------------------
if [[ -x "$PY" ]] && ! "$PY" -c 'pass' >/dev/null 2>&1; then
  say "existing ${VENV#"$ROOT"/} is broken (its base Python moved?): recreating it"
  rm -rf "$VENV"
fi
mkdir -p "$VENV" "$LOGDIR"

# One set-up at a time (two `make test` started together on a fresh clone).
if command -v flock >/dev/null; then
  exec 9>"$VENV/.setup.lock"
  flock 9
fi

if [[ ! -x "$PY" ]]; then
  say "creating ${VENV#"$ROOT"/} with $("$BASE_PYTHON" --version 2>&1)"
  run venv "$BASE_PYTHON" -m venv "$VENV"
  rm -f "$STAMP"
fi
PY_VERSION="$("$PY" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')"

# Keys of the steps. A step's key covers its inputs and the keys of the steps it builds on.
KEY_REQS="$(hash_of "$PY_VERSION" "$DISTRO" scripts/setup_venv.sh requirements.txt "$REQ_ROS" \
  requirements-dev.txt "$CONSTRAINTS")"
KEY_MSGS="$(hash_of "$KEY_REQS" CMakeLists.txt package.xml msg/*.msg action/*.action)"
KEY_PKG="$(hash_of "$KEY_REQS" setup.py pyproject.toml)"

declare -A DONE=()
if [[ -f "$STAMP" && "$FORCE" == 0 ]]; then
  while IFS='=' read -r key value; do
    [[ -n "$key" && "$key" != \#* ]] && DONE["$key"]="$value"
  done <"$STAMP"
fi

write_stamp() {
  {
    echo "# inertial_id development environment: hashes of the inputs of each finished step"
    echo "python=$PY_VERSION"
    echo "distro=$DISTRO"
    local key
    for key in requirements messages package; do
      [[ -n "${DONE[$key]:-}" ]] && echo "$key=${DONE[$key]}"
    done
  } >"$STAMP.tmp"
  mv "$STAMP.tmp" "$STAMP"
}

changed=0

# --- 2. dependencies ------------------------------------------------------------------------
if [[ "${DONE[requirements]:-}" != "$KEY_REQS" ]]; then
  changed=1
  say "installing pip 26.3"
  run pip-upgrade "$PY" -m pip install pip==26.3
  # requirements*.txt pin the direct dependencies; constraints-<distro>.txt pins every package
  # they pull in, so a fresh machine gets exactly the versions the tests ran with.
  say "installing requirements.txt, $REQ_ROS, requirements-dev.txt (a few minutes the first time)"
  run pip-requirements "$PY" -m pip install -r requirements.txt -r "$REQ_ROS" \
    -r requirements-dev.txt -c "$CONSTRAINTS"

  # The ROS wheels' exported CMake files (share/<pkg>/cmake/*.cmake) name the include
  # directories of the Python the wheels were built with (/opt/python/cpXY-cpXY/...). Point
  # them at this venv's Python headers and numpy instead, or the message build cannot find
  # Python.h / numpy. Idempotent: patched files no longer contain /opt/python.
  say "patching the wheels' CMake files to this Python's include directories"
  run patch-cmake "$PY" - "$VENV" <<'EOF'
import pathlib
import re
import sys
import sysconfig

import numpy

venv = pathlib.Path(sys.argv[1])
py_include = sysconfig.get_paths()["include"]
np_include = numpy.get_include()
if not (pathlib.Path(py_include) / "Python.h").is_file():
    sys.exit(f"Python.h not found in {py_include}: install this Python's development headers")
np_pattern = re.compile(r"/opt/python/[^;\"\s]*/site-packages/numpy/(?:_core|core)/include")
py_pattern = re.compile(r"/opt/python/cp\d+-cp\d+t?/include/python\d+\.\d+t?")
patched = 0
for path in sorted((venv / "share").rglob("*.cmake")):
    text = path.read_text()
    if "/opt/python/" not in text:
        continue
    new = py_pattern.sub(py_include, np_pattern.sub(np_include, text))
    if "/opt/python/" in new:
        sys.exit(f"{path}: unexpected /opt/python path left after patching")
    path.write_text(new)
    patched += 1
print(f"patched {patched} files: python include {py_include}, numpy include {np_include}")
EOF
  DONE[requirements]="$KEY_REQS"
  write_stamp
fi

# --- 3. messages ----------------------------------------------------------------------------
if [[ "${DONE[messages]:-}" != "$KEY_MSGS" ]]; then
  changed=1
  # Remove what an earlier build installed (a deleted or renamed message leaves nothing behind),
  # then build from scratch: a few seconds, and no stale generated code.
  if [[ -f "$BUILD/install_manifest.txt" ]]; then
    say "removing the previously installed messages"
    while IFS= read -r f; do
      [[ "$f" == "$VENV"/* ]] && rm -f "$f"
    done <"$BUILD/install_manifest.txt"
  fi
  rm -rf "$BUILD"
  # Only this venv: a sourced ROS 2 environment must not leak into the build.
  build_env=(env AMENT_PREFIX_PATH="$VENV" CMAKE_PREFIX_PATH="$VENV" PATH="$VENV/bin:$PATH")
  say "configuring the messages (cmake, ${BUILD#"$ROOT"/}/)"
  run cmake-configure "${build_env[@]}" cmake -S "$ROOT" -B "$BUILD" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$VENV" \
    -DCMAKE_INSTALL_PREFIX="$VENV" \
    -DPython3_EXECUTABLE="$PY" \
    -DBUILD_TESTING=OFF \
    -DINERTIAL_ID_INSTALL_PYTHON=OFF
  say "building the messages"
  run cmake-build "${build_env[@]}" cmake --build "$BUILD" --parallel "$(nproc 2>/dev/null || echo 2)"
  say "installing the messages into ${VENV#"$ROOT"/}"
  # The generated Python modules go to <venv>/lib/pythonX.Y/site-packages/inertial_id (without
  # __init__.py, see CMakeLists.txt), the C libraries to <venv>/lib: the ROS wheels' start-up
  # hook (ros_wheels_bootstrapper.pth) re-launches the venv's python with <venv>/lib on
  # LD_LIBRARY_PATH, so they are found without an rpath or any environment set-up.
  run cmake-install "${build_env[@]}" cmake --install "$BUILD"
  DONE[messages]="$KEY_MSGS"
  write_stamp
fi

# --- 4. this package, editable ----------------------------------------------------------------
if [[ "${DONE[package]:-}" != "$KEY_PKG" ]]; then
  changed=1
  say "installing inertial_id in editable mode (pip install --no-deps -e .)"
  # compat mode: a plain .pth entry with the repository root, so the source tree's inertial_id
  # stays an ordinary directory on sys.path that inertial_id/__init__.py can extend.
  run pip-editable "$PY" -m pip install --no-deps -e "$ROOT" --config-settings editable_mode=compat
  DONE[package]="$KEY_PKG"
  write_stamp
fi

# --- check ----------------------------------------------------------------------------------
if [[ "$changed" == 1 ]]; then
  say "checking: import inertial_id and its messages from outside the repository"
  (cd / && run import-check "$PY" - "$ROOT" <<'EOF'
import os
import sys

import inertial_id
from inertial_id.msg import ContactAnomaly, InertialParameters, JointSamples, SensorSamples

root = os.path.realpath(sys.argv[1])
where = os.path.realpath(inertial_id.__file__)
if not where.startswith(root + os.sep):
    sys.exit(f"inertial_id is imported from {where}, not from the source tree {root}")
for cls in (InertialParameters, ContactAnomaly, JointSamples, SensorSamples):
    type(cls).__import_type_support__()  # loads the compiled type support (.so) modules
    if cls._TYPE_SUPPORT is None:
        sys.exit(f"no type support for {cls.__name__}")
print("ok", where)
EOF
  )
  say "compiling the dedicated SDP solver into numba's cache (about a minute; once per change)"
  (cd / && run sdp-compile "$PY" -c "from inertial_id.core.estimation import sdp; sdp.warm_up()")
  say "compiling the matched filter's and the bag reader's loops into numba's cache (seconds)"
  (cd / && run filter-compile "$PY" -c "from inertial_id.core.gathering.synchronizer import \
kernel; from inertial_id.io import mcap_scan; assert kernel.compiled_kernel() \
and mcap_scan.compiled_scan()")
  say "ready: ${VENV#"$ROOT"/} (Python $PY_VERSION, ROS 2 $DISTRO)"
else
  say "up to date: nothing to do"
fi
touch "$STAMP"
