"""Trajectories, ROS 2 bags and preprocessing.

Typical use::

    layout = BagLayout(
        joint_states=JointStateTopic("/franka/joint_states"),
        mocap=(MocapTopic("box", "/vicon/box/box", msgtype="geometry_msgs/msg/TransformStamped"),),
        commands=(CommandTopic("/franka/desired_joint_states", label="desired",
                               fields=("position", "velocity")),),
    )
    dataset, summary = read_bag("recording", layout)   # mcap or sqlite3, streamed
    print(summary)                                       # duplicated / out-of-order / invalid
    write_bag(dataset, "copy", layout)                   # mcap by default
"""

from dynid.data.bag import (
    DEFAULT_SEGMENT_TOPIC,
    JointStateChunk,
    bag_messages,
    iter_joint_states,
    open_bag,
    read_bag,
    read_segments,
)
from dynid.data.bag_write import write_bag
from dynid.data.errors import (
    BagReadError,
    BagWriteError,
    DataError,
    PreprocessError,
    TrajectoryError,
)
from dynid.data.messages import TRAJECTORY_SEGMENT_DEFINITION, StorageFormat
from dynid.data.stream import ReadSummary, TopicSummary
from dynid.data.topics import (
    BagLayout,
    CommandTopic,
    JointStateTopic,
    MocapTopic,
    OutOfOrder,
    StampSource,
    TfLookup,
)
from dynid.data.trajectory import Dataset, Trajectory

__all__ = [
    "DEFAULT_SEGMENT_TOPIC",
    "TRAJECTORY_SEGMENT_DEFINITION",
    "BagLayout",
    "BagReadError",
    "BagWriteError",
    "CommandTopic",
    "DataError",
    "Dataset",
    "JointStateChunk",
    "JointStateTopic",
    "MocapTopic",
    "OutOfOrder",
    "PreprocessError",
    "ReadSummary",
    "StampSource",
    "StorageFormat",
    "TfLookup",
    "TopicSummary",
    "Trajectory",
    "TrajectoryError",
    "bag_messages",
    "iter_joint_states",
    "open_bag",
    "read_bag",
    "read_segments",
    "write_bag",
]
