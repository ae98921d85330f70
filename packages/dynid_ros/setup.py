"""ament_python package of the dynid ROS 2 nodes."""

from setuptools import find_packages, setup

PACKAGE = "dynid_ros"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="dynid developers",
    maintainer_email="dynid@users.noreply.github.com",
    description=(
        "ROS 2 nodes of dynid: recorder, estimator, bag player, robot_tf, robot_sim, "
        "payload_applier, payload_tracker, exciter"
    ),
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "recorder = dynid_ros.recorder:main",
            "estimator = dynid_ros.estimator_node:main",
            "bag_player = dynid_ros.bag_player:main",
            "robot_tf = dynid_ros.robot_tf:main",
            "robot_sim = dynid_ros.robot_sim:main",
            "payload_applier = dynid_ros.payload_applier:main",
            "payload_tracker = dynid_ros.payload_tracker:main",
            "exciter = dynid_ros.exciter:main",
        ],
    },
)
