"""Contact detection through the ROS pipeline: simulator, gatherer, kinematics and solver in
one process and one executor (as ``inertial-id demo`` runs them), with a probe node.

The simulator pushes on the payload twice (5 N at the default point (0, 0, 0.1) m of the sensor
frame). Sign of the external wrench: the simulator publishes the wrench the payload exerts on
the sensor, ``w = s (Y pi - w_ext) + offset`` with ``s = -1`` and ``w_ext`` the external wrench
on the payload, so ``w = -Y pi + w_ext + offset``. The solver predicts ``-Y pi_hat + offset_hat``
and publishes ``w - w_hat``, which is ``+w_ext = [F; p x F]`` once the estimate is right.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import rclpy
import yaml
from geometry_msgs.msg import InertiaStamped, WrenchStamped
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rosgraph_msgs.msg import Clock
from scipy.spatial.transform import Rotation
from std_srvs.srv import Trigger
from visualization_msgs.msg import Marker, MarkerArray

from inertial_id.core.errors import InertialIdError
from inertial_id.core.shape import EquivalentBox
from inertial_id.core.simulation import (
    BUNDLED_SENSOR_FRAME,
    Contact,
    bundled_urdf_path,
    default_payload,
)
from inertial_id.io import calibration
from inertial_id.msg import ContactAnomaly, InertialParameters
from inertial_id.nodes.common import to_seconds, to_stamp
from inertial_id.nodes.gatherer import Gatherer
from inertial_id.nodes.kinematics import Kinematics
from inertial_id.nodes.simulator import Simulator
from inertial_id.nodes.solver import Solver

POINT = np.array([0.0, 0.0, 0.1])  # the simulator's contact point, sensor frame
# (start s, duration s, force N): pushes along +y and +x of the sensor frame
CONTACTS = ((8.0, 0.8, np.array([0.0, 5.0, 0.0])), (11.0, 0.8, np.array([5.0, 0.0, 0.0])))
RUN_TIME = 14.0  # s of simulated data
WALL_SLACK = 46.0  # s of wall time allowed on top, for a loaded machine
CLOCK_START = 1000.0  # s, the sim time the simulator starts at
CLOCK_STEP = 0.02  # s of sim time per /clock message (and wall period of the driver)
MAX_LAG = 0.3  # s, how far the simulation may run ahead of the solver
# save while frozen: the estimate cannot change between the save and its response
SERVICE_TIMES = {"freeze": 12.3, "save": 12.5, "resume": 12.8, "reset": 13.3}


class Probe(Node):
    """Records the solver's contact and external-wrench messages and calls its services."""

    def __init__(self, context: rclpy.Context) -> None:
        super().__init__("contact_probe", context=context)
        self.contacts: list[ContactAnomaly] = []
        self.external: list[WrenchStamped] = []
        self.create_subscription(ContactAnomaly, "/solver/contact", self.contacts.append, 1000)
        self.create_subscription(WrenchStamped, "/solver/external_wrench",
                                 self.external.append, 1000)
        self.markers: list[MarkerArray] = []
        self.inertia: list[InertiaStamped] = []
        self.create_subscription(MarkerArray, "/solver/markers", self.markers.append, 100)
        self.create_subscription(InertiaStamped, "/solver/inertia", self.inertia.append, 100)
        self.clients_ = {name: self.create_client(Trigger, f"/solver/{name}")
                         for name in SERVICE_TIMES}


def flat_contacts() -> list[float]:
    return [float(x) for start, duration, force in CONTACTS for x in (start, duration, *force)]


def test_simulator_takes_contacts_from_its_parameter() -> None:
    """``contacts`` (and every array parameter whose default is ``[]``) must accept a value
    (rclpy ignores a descriptor's type: declared from ``[]`` it would be a BYTE_ARRAY that
    refuses doubles, and config/demo.yaml could not start the simulator)."""
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        simulator = Simulator(context=context, parameter_overrides=[
            Parameter("contacts", value=flat_contacts())])
        assert simulator.get_parameter("contacts").value == flat_contacts()
        assert simulator.sim.contacts == tuple(
            Contact(start, duration, tuple(force)) for start, duration, force in CONTACTS)
        simulator.destroy_node()
        gatherer = Gatherer(context=context, parameter_overrides=[
            Parameter("urdf_path", value=bundled_urdf_path()),
            Parameter("locked_joint_names", value=["wrist_3_joint"])])
        assert gatherer.get_parameter("locked_joint_names").value == ["wrist_3_joint"]
        gatherer.destroy_node()
    finally:
        rclpy.shutdown(context=context)


@pytest.fixture(scope="module")
def pipeline_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Runs the pipeline over RUN_TIME s of simulated data; what the probe and solver saw.

    The simulator runs on sim time from a /clock the test publishes: at wall-clock pace, but
    never more than MAX_LAG ahead of the data the solver has processed. On an idle machine
    this is plain real time (~14 s); on a loaded one the simulation slows down instead of the
    best-effort sensor topics dropping samples. The other nodes use wall time, as a robot's
    would (they only ever look at header stamps).
    """
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        simulator = Simulator(context=context, parameter_overrides=[
            Parameter("use_sim_time", value=True),
            Parameter("wrench_rate", value=500.0),
            Parameter("joint_state_rate", value=250.0),
            Parameter("seed", value=3),
            Parameter("contacts", value=flat_contacts()),
        ])
        urdf = [Parameter("urdf_path", value=bundled_urdf_path())]
        calibration_file = tmp_path_factory.mktemp("calibration") / "payload.yaml"
        solver = Solver(context=context, parameter_overrides=[
            Parameter("calibration_file", value=str(calibration_file))])
        # The filter set, as 41 samples with lag 2 at these 250 Hz joint states: a chosen
        # one holds the first 4 s, and the clock waits for the solver, so no data would come.
        gatherer = Gatherer(context=context, parameter_overrides=[
            *urdf, Parameter("filter_window", value=0.16), Parameter("filter_delay", value=0.008)])
        nodes = [simulator, gatherer,
                 Kinematics(context=context, parameter_overrides=urdf), solver]
        probe = Probe(context)
        clock = probe.create_publisher(Clock, "/clock", 10)
        executor = SingleThreadedExecutor(context=context)
        for node in [*nodes, probe]:
            executor.add_node(node)
        responses: dict[str, Trigger.Response | None] = {}
        saved: dict[str, object] = {}  # the estimate when ~/save answered
        pending: dict[str, rclpy.task.Future] = {}
        state = {"sim": 0.0, "wall": time.monotonic()}
        done = rclpy.task.Future()
        clock.publish(Clock(clock=to_stamp(CLOCK_START)))

        def drive() -> None:
            """Advance /clock, call the services on schedule, stop after RUN_TIME s of data."""
            processed = 0.0
            if simulator.start is not None and solver.last_stamp is not None:
                processed = solver.last_stamp - simulator.start
            target = min(time.monotonic() - state["wall"], processed + MAX_LAG)
            while state["sim"] + CLOCK_STEP <= target:
                state["sim"] += CLOCK_STEP
                clock.publish(Clock(clock=to_stamp(CLOCK_START + state["sim"])))
            for name, at in SERVICE_TIMES.items():
                if name not in pending and processed >= at:
                    pending[name] = probe.clients_[name].call_async(Trigger.Request())
            for name, future in pending.items():
                if future.done() and name not in responses:
                    responses[name] = future.result()
                    if name == "save":
                        saved.update(mass=solver.online.estimate.body.mass,
                                     verdicts=solver.online.verdicts)
            if processed >= RUN_TIME and len(responses) == len(SERVICE_TIMES):
                done.set_result(True)

        probe.create_timer(CLOCK_STEP, drive)
        executor.spin_until_future_complete(done, timeout_sec=RUN_TIME + WALL_SLACK)
        return {"start": simulator.start, "contacts": list(probe.contacts),
                "markers": list(probe.markers), "inertia": list(probe.inertia),
                "external": list(probe.external), "responses": responses,
                "intervals": list(solver.online.contacts),
                "payload_changes": list(solver.online.payload_changes),
                "wall_time": time.monotonic() - state["wall"],
                "calibration_file": calibration_file, "saved": saved}
    finally:
        rclpy.shutdown(context=context)


def stamps(messages: list, start: float) -> np.ndarray:
    return np.array([to_seconds(m.header.stamp) - start for m in messages])


def test_contacts_are_flagged_at_the_injected_times(pipeline_run: dict) -> None:
    start = pipeline_run["start"]
    messages = pipeline_run["contacts"]
    assert messages, "no /solver/contact message"
    t = stamps(messages, start)
    flagged = t[[m.contact for m in messages]]
    assert flagged.size, "no contact flagged"
    # the monitor was trained (T^2 > 0) well before the first push and flagged nothing there
    # (the gatherer's centred Savitzky-Golay window may show a step up to ~30 ms early)
    trained = t[[m.monitor_trained for m in messages]]
    assert trained.size and trained.min() < CONTACTS[0][0] - 1.0, "monitor not trained in time"
    assert flagged.min() >= CONTACTS[0][0] - 0.03
    for begin, duration, _ in CONTACTS:
        inside = flagged[(flagged >= begin) & (flagged <= begin + duration + 0.1)]
        assert inside.size, f"contact at {begin} s not flagged"
        assert inside.min() - begin < 0.05
    outside = [x for x in flagged
               if not any(b <= x <= b + d + 0.1 for b, d, _ in CONTACTS)]
    assert not outside, f"contacts flagged at {outside}"
    assert [round(i.start - start, 1) for i in pipeline_run["intervals"]] == [8.0, 11.0]
    assert not pipeline_run["payload_changes"]
    # before training the message says so instead of carrying an infinite threshold
    assert all(m.confidence == pytest.approx(0.999) for m in messages)
    assert all(np.isfinite(m.threshold) and (m.threshold > 0) == m.monitor_trained
               for m in messages)
    assert all(m.t2 == 0.0 and not m.contact for m in messages if not m.monitor_trained)


def test_external_wrench_is_the_push(pipeline_run: dict) -> None:
    start = pipeline_run["start"]
    messages = pipeline_run["external"]
    t = stamps(messages, start)
    w = np.array([[m.wrench.force.x, m.wrench.force.y, m.wrench.force.z,
                   m.wrench.torque.x, m.wrench.torque.y, m.wrench.torque.z] for m in messages])
    for begin, duration, force in CONTACTS:
        expected = np.concatenate((force, np.cross(POINT, force)))
        during = (t > begin + 0.1) & (t < begin + duration - 0.1)
        assert during.sum() >= 10
        measured = np.median(w[during], axis=0)
        np.testing.assert_allclose(measured[:3], expected[:3], atol=0.3)
        np.testing.assert_allclose(measured[3:], expected[3:], atol=0.03)
    # between the pushes the compensated signal is ~zero
    calm = (t > 9.5) & (t < 10.5)
    assert calm.sum() >= 10
    assert np.abs(np.median(w[calm], axis=0)[:3]).max() < 0.1


def test_services_answer(pipeline_run: dict) -> None:
    responses = pipeline_run["responses"]
    assert set(responses) == set(SERVICE_TIMES)
    for name, response in responses.items():
        assert response is not None and response.success, (name, response)


def test_the_rviz_markers_draw_the_estimate(pipeline_run: dict) -> None:
    """``~/markers``: the CoM sphere at the published CoM, the box whose inertia is the
    published one, the mass in the text; greyed during a contact, in colour when converged;
    all cleared by the reset at the end."""
    arrays = pipeline_run["markers"]
    inertia = {(m.header.stamp.sec, m.header.stamp.nanosec): m.inertia
               for m in pipeline_run["inertia"]}
    drawn = [a for a in arrays if a.markers[0].action == Marker.ADD]
    assert len(drawn) > 10
    last = drawn[-1]
    com, box, text = last.markers
    published = inertia[(com.header.stamp.sec, com.header.stamp.nanosec)]
    assert com.header.frame_id == BUNDLED_SENSOR_FRAME
    assert (com.type, box.type, text.type) == (Marker.SPHERE, Marker.CUBE,
                                                Marker.TEXT_VIEW_FACING)
    centre = [published.com.x, published.com.y, published.com.z]
    for marker in (com, box):
        p = marker.pose.position
        np.testing.assert_allclose([p.x, p.y, p.z], centre, atol=1e-12)
    q = box.pose.orientation
    shape = EquivalentBox(Rotation.from_quat([q.x, q.y, q.z, q.w]).as_matrix(),
                          np.array([box.scale.x, box.scale.y, box.scale.z]))
    tensor = np.array([[published.ixx, published.ixy, published.ixz],
                       [published.ixy, published.iyy, published.iyz],
                       [published.ixz, published.iyz, published.izz]])
    np.testing.assert_allclose(shape.inertia(published.m), tensor, rtol=0,
                               atol=1e-9 * np.abs(tensor).max())
    assert text.text.startswith(f"{published.m:.3f} ± ")
    colours = {a.markers[1].color.r for a in drawn}
    assert {1.0, 0.5} <= colours  # in colour (converged) and greyed (the contacts)
    assert arrays[-1].markers[0].action == Marker.DELETEALL  # the reset at 13.3 s


def test_save_writes_the_estimate_it_publishes(pipeline_run: dict) -> None:
    """``~/save`` (frozen): the YAML reads back as the estimate the solver had then, close to
    the simulated payload, in the sensor frame; the URDF snippet lies beside it."""
    path = pipeline_run["calibration_file"]
    assert str(path) in pipeline_run["responses"]["save"].message
    estimate, frame = calibration.load(path)
    assert frame == BUNDLED_SENSOR_FRAME
    assert estimate.body.mass == pytest.approx(pipeline_run["saved"]["mass"], rel=1e-12)
    assert estimate.body.mass == pytest.approx(default_payload().mass, rel=0.02)
    verdicts = pipeline_run["saved"]["verdicts"]
    assert yaml.safe_load(path.read_text())["converged"] == {
        "mass": verdicts.mass, "com": verdicts.com, "inertia": verdicts.inertia}
    assert calibration.snippet_path(path).read_text().startswith("<inertial>")


def test_the_solver_starts_from_a_saved_payload(pipeline_run: dict) -> None:
    """With ``initial_payload_file`` and no data at all, the solver publishes the saved
    payload in the saved frame, marked as not from the data."""
    saved, frame = calibration.load(pipeline_run["calibration_file"])
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        solver = Solver(context=context, parameter_overrides=[
            Parameter("initial_payload_file", value=str(pipeline_run["calibration_file"])),
            Parameter("publish_rate", value=20.0)])
        probe = Node("initial_probe", context=context)
        received: list[InertialParameters] = []
        probe.create_subscription(InertialParameters, "/solver/parameters", received.append, 10)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(solver)
        executor.add_node(probe)
        end = time.monotonic() + 10.0
        while not received and time.monotonic() < end:
            executor.spin_once(timeout_sec=0.05)
        assert received, "nothing published from the saved payload"
        msg = received[-1]
        assert msg.mass == pytest.approx(saved.body.mass, rel=1e-12)
        assert msg.header.frame_id == frame
        assert not solver.online.from_data and solver.online.estimate is not None
        assert solver.diagnostic_status()[2]["estimate_from_data"] is False
        with pytest.raises(InertialIdError, match="no-such-file"):
            Solver(context=context, parameter_overrides=[
                Parameter("initial_payload_file", value="/nonexistent/no-such-file.yaml")])
    finally:
        rclpy.shutdown(context=context)
