"""ROS 2 adapters of dynid: nodes and message conversions (the algorithms live in dynid)."""
