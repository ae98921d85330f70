"""Trajectories, ROS 2 bags and preprocessing."""

from dynid.data.bag import (
    DEFAULT_SEGMENT_TOPIC,
    JointStateChunk,
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
    "iter_joint_states",
    "open_bag",
    "read_bag",
    "read_segments",
    "write_bag",
]
