"""docs/guide/on-the-robot.md, run literally where it can be.

Every ``bash`` block of the guide is run or skipped for the reason its fence states:
``ros2-cli`` blocks need the ``ros2`` command line (``ros2 launch``, ``service call``, ``topic
echo``), which a system ROS 2 install has and the Python wheels here do not; the ``minutes``
block plans a full design. The two plain blocks run as written, in a scratch folder (the guide's
relative paths are those of a checkout: ``config`` is linked there): ``dynid excite`` plans the
short motion, then the five ``ros2 run`` lines start the loop's nodes on robot_sim. ``ros2 run
PKG EXE`` runs the executable colcon installed in ``lib/PKG`` (what ``ros2 run`` execs); a shell
function stands in for the missing command line. The test reads robot_sim's
``~/received_loads`` (what the guide's ``ros2 topic echo`` shows): SetLoad received the guide's
hidden payload, mass within 1 %, centre of mass within 5 mm.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import numpy as np
import yaml
from node_helpers import ROOT, collect, latched_history
from ros_helpers import spin_until
from std_msgs.msg import String

from dynid_bench.robot_loop import interfaces_env

GUIDE = ROOT / "docs" / "guide" / "on-the-robot.md"
FENCE = re.compile(r"^```bash([^\n]*)\n(.*?)^```", re.DOTALL | re.MULTILINE)
SKIPPED = {
    "ros2-cli": "needs the ros2 command line, not in the Python wheels",
    "minutes": "plans a full design: minutes on a CPU",
}
#: ``ros2 run PKG EXE ARGS``: the installed executable, as the ros2 command line runs it
ROS2_RUN = f"""ros2() {{
  [ "$1" = run ] || {{ echo "ros2 $1: no ros2 command line here" >&2; return 127; }}
  "{ROOT}/ros2_ws/install/$2/lib/$2/$3" "${{@:4}}"
}}
"""


def _blocks() -> list[tuple[str, str]]:
    """(tag, body) of every bash block of the guide, in order."""
    return [(m.group(1).strip(), m.group(2)) for m in FENCE.finditer(GUIDE.read_text())]


def test_every_block_is_run_or_skipped_for_the_reason_its_fence_states() -> None:
    blocks = _blocks()
    assert {tag for tag, _ in blocks} <= {"", *SKIPPED}, [tag for tag, _ in blocks]
    for tag, body in blocks:
        uses_cli = re.search(r"\bros2 (launch|service|topic|param)\b", body) is not None
        assert uses_cli == (tag == "ros2-cli"), (tag, body)
        if tag == "minutes":
            assert body.count("dynid excite") == 1, body
    assert [tag for tag, _ in blocks].count("") == 2


def test_the_runnable_blocks_plan_a_motion_and_set_the_hidden_payload(
    test_node, tmp_path: Path
) -> None:
    plan, nodes = [body for tag, body in _blocks() if tag == ""]
    (tmp_path / "config").symlink_to(ROOT / "config")
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", plan], cwd=tmp_path, text=True,
                          capture_output=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    csv = tmp_path / "build" / "excite_short" / "trajectory.csv"
    assert csv.read_text().startswith("time,panda_joint1,"), csv
    mass = float(re.search(r"payload_mass:=([\d.]+)", nodes).group(1))
    com = yaml.safe_load(re.search(r'"payload_com:=(\[[^]]*\])"', nodes).group(1))
    loads = collect(test_node, String, "/robot_sim/received_loads", latched_history())
    verdicts = collect(test_node, String, "/payload_applier/result", latched_history())

    def decided() -> bool:
        outcomes = [yaml.safe_load(m.data)["outcome"] for m in verdicts]
        return bool(loads) or bool(set(outcomes) - {"sent", "waiting"})

    log = (tmp_path / "nodes.log").open("w")
    env = interfaces_env()
    proc = subprocess.Popen(["bash", "-c", ROS2_RUN + nodes], cwd=tmp_path, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    try:
        spin_until(test_node, lambda: decided() or proc.poll() is not None, 300.0)
        spin_until(test_node, lambda: bool(loads), 5.0 if decided() else 0.0)  # the answer
        output = (tmp_path / "nodes.log").read_text()
        assert loads, f"no load set; the nodes' output:\n{output[-6000:]}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()
    request = yaml.safe_load(loads[-1].data)["request"]
    assert abs(request["mass"] - mass) <= 0.01 * mass, request
    assert np.linalg.norm(np.subtract(request["center_of_mass"], com)) <= 0.005, request
    assert (tmp_path / "dynid_output" / "by_hand" / "identified" / "posterior.yaml").is_file()
