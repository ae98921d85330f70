"""payload_applier over real DDS against robot_sim's Franka SetLoad and UR SetPayload: nothing
is sent when a gate fails (and the result names the gate) or when ``apply`` is left at none;
after an estimator run ends CONVERGED, the load the fit identified goes to SetLoad with the right
values (inertia column-major) and the answer is published; ``~/apply`` sends it to SetPayload.

The fit's output is a ``posterior.yaml`` written by :meth:`Posterior.to_yaml`, as the estimator
writes it; robot_sim and the applier run with ``franka_msgs`` importable (``stand_in_env``).
"""

from __future__ import annotations

import numpy as np
import yaml
from node_helpers import (
    STARTUP_S,
    call_service,
    collect,
    executable,
    latched_history,
    output_of,
    ros_args,
    wait_for,
)
from std_msgs.msg import String
from std_srvs.srv import Trigger

from dynid.posterior import Posterior
from dynid_msgs.msg import EstimatorStatus
from dynid_ros.qos import latched

NAMES = ["payload/mass", "payload/com_x", "payload/com_y", "payload/com_z", "payload/ixx",
         "payload/ixy", "payload/iyy", "payload/ixz", "payload/iyz", "payload/izz"]  # fmt: skip
VALUES = [1.2, 0.03, -0.02, 0.06, 4e-3, 1e-4, 5e-3, -2e-4, 3e-4, 6e-3]
VALIDATION = {"quantity": "torque", "identified": {"rmse_overall": 0.05},
              "nominal": {"rmse_overall": 0.42}}  # fmt: skip


def write_fit(folder, mass_std: float) -> None:
    std = np.array([mass_std, 1e-3, 1e-3, 1e-3, *[1e-4] * 6])
    units = ["kg", "m", "m", "m", *["kg*m^2"] * 6]
    folder.mkdir(exist_ok=True)
    Posterior(particles=np.array([VALUES]), names=NAMES, units=units,
              covariance=np.diag(std**2), meta={"validation": VALIDATION},
              ).to_yaml(folder / "posterior.yaml")  # fmt: skip


def test_a_failing_gate_sends_nothing_and_a_converged_fit_sets_the_load(
    test_node, spawn, tmp_path, stand_in_env
) -> None:
    out = tmp_path / "fit"
    write_fit(out, mass_std=0.2)  # far above max_mass_std
    sim = spawn(executable("robot_sim"), *ros_args({"seed": 2}), env=stand_in_env)
    applier = spawn(executable("payload_applier"), *ros_args({
        "problem": "panda_payload", "posterior_dir": str(out), "apply": "franka",
    }), env=stand_in_env)  # fmt: skip
    received = collect(test_node, String, "/robot_sim/received_loads", latched_history())
    results = collect(test_node, String, "/payload_applier/result", latched_history())
    status = test_node.create_publisher(EstimatorStatus, "/estimator/status", latched())
    wait_for(test_node, lambda: status.get_subscription_count() > 0, "payload_applier", applier,
             STARTUP_S)  # fmt: skip
    wait_for(test_node, lambda: test_node.count_publishers("/robot_sim/received_loads") > 0,
             "robot_sim", sim, STARTUP_S)  # fmt: skip

    refused = call_service(test_node, Trigger, "/payload_applier/apply", Trigger.Request(),
                           STARTUP_S, applier)  # fmt: skip
    assert not refused.success
    assert "mass_std" in refused.message
    wait_for(test_node, lambda: len(results) >= 1, "the refusal", applier)
    report = yaml.safe_load(results[-1].data)
    assert report["outcome"] == "gates_failed"
    assert [g["name"] for g in report["gates"] if not g["passed"]] == ["mass_std"]
    assert report["sent"] is None

    write_fit(out, mass_std=0.004)
    # robot_sim creates its services after its topics: wait until SetLoad is there
    wait_for(test_node, lambda: any(name == "/service_server/set_load" for name, _ in
                                    test_node.get_service_names_and_types()),
             "robot_sim's SetLoad service", sim)  # fmt: skip
    done = EstimatorStatus(state=EstimatorStatus.CONVERGED, estimator="lm", message="converged")
    done.header.stamp = test_node.get_clock().now().to_msg()
    status.publish(done)
    wait_for(test_node, lambda: received, "SetLoad at robot_sim", applier)
    got = yaml.safe_load(received[-1].data)
    assert got["count"] == 1  # the refused fit sent nothing
    assert got["service"] == "franka_msgs/srv/SetLoad"
    request = got["request"]
    assert request["mass"] == 1.2
    np.testing.assert_allclose(request["center_of_mass"], [0.03, -0.02, 0.06], atol=1e-12)
    inertia = [[4e-3, 1e-4, -2e-4], [1e-4, 5e-3, 3e-4], [-2e-4, 3e-4, 6e-3]]
    np.testing.assert_allclose(np.reshape(request["load_inertia"], (3, 3), order="F"), inertia,
                               atol=1e-15)  # fmt: skip
    wait_for(test_node, lambda: yaml.safe_load(results[-1].data)["outcome"] == "applied",
             "the applier's report of the answer", applier)  # fmt: skip
    report = yaml.safe_load(results[-1].data)
    assert report["answer"] == {"success": True, "error": ""}
    assert report["frame"] == "panda_link8"
    assert report["sent"]["mass"] == 1.2, output_of(applier)


def test_apply_none_sends_nothing_and_ur_set_payload_gets_the_inertia(
    test_node, spawn, tmp_path, stand_in_env
) -> None:
    """With ``apply`` left at none the applier says what it would send and sends nothing; with
    ``ur`` its ``~/apply`` sends SetPayload (its wire type: float32 mass, centre of gravity, six
    inertia terms)."""
    out = tmp_path / "fit"
    write_fit(out, mass_std=0.004)
    sim = spawn(executable("robot_sim"), *ros_args({"seed": 3}), env=stand_in_env)
    dry = spawn(executable("payload_applier"), *ros_args(
        {"problem": "panda_payload", "posterior_dir": str(out)}, "-r", "__node:=dry_applier",
    ), env=stand_in_env)  # fmt: skip
    ur = spawn(executable("payload_applier"), *ros_args(
        {"problem": "panda_payload", "posterior_dir": str(out), "apply": "ur",
         "flange_frame": "panda_link8"}, "-r", "__node:=ur_applier",
    ), env=stand_in_env)  # fmt: skip
    received = collect(test_node, String, "/robot_sim/received_loads", latched_history())
    wait_for(test_node, lambda: test_node.count_publishers("/robot_sim/received_loads") > 0,
             "robot_sim", sim, STARTUP_S)  # fmt: skip
    dry_answer = call_service(test_node, Trigger, "/dry_applier/apply", Trigger.Request(),
                              STARTUP_S, dry)  # fmt: skip
    assert dry_answer.success
    assert dry_answer.message.startswith("apply is none; would send {'mass': 1.2")
    answer = call_service(test_node, Trigger, "/ur_applier/apply", Trigger.Request(), STARTUP_S,
                          ur)  # fmt: skip
    assert answer.success, answer.message
    wait_for(test_node, lambda: received, "SetPayload", ur)
    got = yaml.safe_load(received[-1].data)
    assert got["count"] == 1  # the dry run sent nothing
    assert got["service"] == "ur_msgs/srv/SetPayload"
    request = got["request"]
    assert request["mass"] == np.float32(1.2)  # float32 on the wire
    np.testing.assert_allclose(request["center_of_gravity"], [0.03, -0.02, 0.06], atol=1e-12)
    assert [request[k] for k in ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")] == [
        4e-3, 5e-3, 6e-3, 1e-4, -2e-4, 3e-4]  # fmt: skip


def test_bad_parameters_are_refused_with_a_message(spawn, stand_in_env) -> None:
    cases = (
        ({"problem": "panda_payload", "apply": "kuka"}, "parameter 'apply' must be one of"),
        ({"apply": "franka"}, "parameter 'problem' must name the payload fit's problem file"),
        ({"problem": "panda_payload", "flange_frame": "tool0"}, "has no frame 'tool0'"),
    )
    procs = [spawn(executable("payload_applier"), *ros_args(p), env=stand_in_env) for p, _ in cases]
    for proc, (_, message) in zip(procs, cases, strict=True):  # started together: one wait
        assert proc.wait(timeout=STARTUP_S) == 2
        assert message in output_of(proc)
