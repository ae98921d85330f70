"""Trajectories, ROS 2 bags and preprocessing."""
