"""pip/setuptools metadata for the Python package ``inertial_id``.

Used by the development virtual environment (``make venv`` runs
``pip install --no-deps -e . --config-settings editable_mode=compat``). A real ROS 2 install
does not use this file: ``colcon build`` builds the package with CMake (see CMakeLists.txt and
package.xml), which installs the Python package, the messages and the node executables.
"""

from setuptools import find_packages, setup

NODES = ("gatherer", "kinematics", "solver", "pipeline", "simulator", "applier", "identify")

setup(
    name="inertial_id",
    version="0.1.0",
    description=(
        "Online identification of payload inertial parameters behind a force/torque sensor"
    ),
    license="MIT",
    # inertial_id.msg is not in the source tree: CMake generates and installs it (see
    # inertial_id/__init__.py for how the two directories form one package).
    # Flat layout declared explicitly: setuptools then implements any editable install (not only
    # compat mode) as a plain .pth entry for the repository root, not an import hook.
    package_dir={"": "."},
    packages=find_packages(include=["inertial_id", "inertial_id.*"]),
    package_data={"inertial_id": ["resources/*", "resources/**/*"]},
    python_requires=">=3.10",
    # Deliberately empty: the dependencies (the ROS 2 wheels, pinocchio, cvxpy, ...) are pinned
    # in requirements.txt and requirements-<distro>.txt and installed by scripts/setup_venv.sh,
    # and this package is installed with --no-deps. On a real ROS 2 install they come from the
    # system (rosdep keys in package.xml) and requirements-robot.txt (cvxpy, rosbags), and
    # several have different names there, so pip must not try to resolve them.
    install_requires=[],
    entry_points={
        "console_scripts": ["inertial-id = inertial_id.entry_points:cli"]
        + [f"inertial_id_{name} = inertial_id.entry_points:{name}" for name in NODES],
    },
)
