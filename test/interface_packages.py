"""Test-only copies of the robot drivers' interface packages, built like inertial_id's messages.

``ur_msgs`` (``SetPayload``, the classic request), ``franka_msgs`` (``SetLoad``),
``xarm_msgs`` (``SetTcpLoad``) and ``control_msgs`` (``FollowJointTrajectory``, the trajectory
controller's action) are not on the package index. Their definitions (the
field lists the drivers document) are in ``test/interfaces/<package>/``; :func:`build` runs
``rosidl_generate_interfaces`` on each with plain CMake against this venv, as
``scripts/setup_venv.sh`` builds the package's own messages, into a prefix under ``build/``
(``build/test-interfaces`` for .venv, ``build/test-interfaces-jazzy`` for .venv-jazzy),
rebuilt only when a definition changes. The prefix is not the venv: the nodes must load the
types by name and cope when they are absent.

``python test/interface_packages.py --env`` builds them and prints the shell lines that make
them usable (``inertial-id demo --apply ur`` needs ``ur_msgs``).
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = Path(__file__).resolve().parent / "interfaces"
PACKAGES = ("ur_msgs", "franka_msgs", "xarm_msgs", "control_msgs")


@dataclass(frozen=True)
class Prefix:
    """An install prefix holding the built packages."""

    root: Path

    @property
    def python(self) -> Path:
        """Where the generated Python modules are (for ``sys.path`` / ``PYTHONPATH``)."""
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        return self.root / "lib" / version / "site-packages"

    @property
    def lib(self) -> Path:
        """Where the C type-support libraries are (for ``LD_LIBRARY_PATH``)."""
        return self.root / "lib"

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        """``env`` with the packages importable and their libraries found (a subprocess)."""
        out = dict(env)
        for key, path in (("PYTHONPATH", self.python), ("LD_LIBRARY_PATH", self.lib),
                          ("AMENT_PREFIX_PATH", self.root)):
            out[key] = os.pathsep.join(p for p in (str(path), env.get(key, "")) if p)
        return out

    def activate(self) -> None:
        """Make the packages usable in this process: ``sys.path`` for the modules, and every
        library loaded now: rosidl's type-support dispatch opens them by their bare names,
        which the dynamic loader resolves against the libraries already loaded (the
        ``LD_LIBRARY_PATH`` it read when this process started does not have the prefix)."""
        if str(self.python) not in sys.path:
            sys.path.insert(0, str(self.python))
        for library in sorted(self.lib.glob("lib*.so")):
            ctypes.CDLL(str(library), mode=ctypes.RTLD_GLOBAL)


def _key() -> str:
    digest = hashlib.sha256(f"{sys.prefix}\0{sys.version}".encode())
    for path in sorted(SOURCES.rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(SOURCES)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def build() -> Prefix:
    """Build and install the packages (once per change of their definitions); raise
    with the build's output when it fails."""
    venv = Path(sys.prefix)
    prefix = Prefix(ROOT / "build" / f"test-interfaces{venv.name.removeprefix('.venv')}")
    stamp = prefix.root / ".built"
    prefix.root.mkdir(parents=True, exist_ok=True)
    with open(prefix.root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time (parallel test runs)
        if stamp.is_file() and stamp.read_text() == _key():
            return prefix
        env = {**os.environ, "AMENT_PREFIX_PATH": str(venv), "CMAKE_PREFIX_PATH": str(venv),
               "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}
        for package in PACKAGES:
            work = prefix.root / "work" / package
            steps = (
                ["cmake", "-S", str(SOURCES / package), "-B", str(work),
                 "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_PREFIX_PATH={prefix.root};{venv}",
                 f"-DCMAKE_INSTALL_PREFIX={prefix.root}", f"-DPython3_EXECUTABLE={sys.executable}",
                 f"-DCMAKE_INSTALL_RPATH={prefix.lib}", "-DBUILD_TESTING=OFF",
                 f"-DPython3_INCLUDE_DIR={sysconfig.get_paths()['include']}"],
                ["cmake", "--build", str(work), "--parallel", "2"],
                ["cmake", "--install", str(work)],
            )
            for step in steps:
                done = subprocess.run(step, env=env, capture_output=True, text=True, check=False)
                if done.returncode:
                    raise RuntimeError(f"{' '.join(step)} failed:\n{done.stdout[-4000:]}\n"
                                       f"{done.stderr[-4000:]}")
        stamp.write_text(_key())
    return prefix


def main(argv: list[str]) -> int:
    """Build; with ``--env``, print ``export`` lines for a shell (the prefix's paths)."""
    prefix = build()
    if "--env" not in argv:
        print(f"built {', '.join(PACKAGES)} into {prefix.root}")
        return 0
    environment = prefix.environment(dict(os.environ))
    for key in ("PYTHONPATH", "LD_LIBRARY_PATH", "AMENT_PREFIX_PATH"):
        print(f"export {key}='{environment[key]}'")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
