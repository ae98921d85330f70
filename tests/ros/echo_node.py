"""A relay node for the message round-trip test: republishes ``<type>/in`` on ``<type>/out``.

Run as a separate process so that messages cross DDS between two participants.
Usage: python echo_node.py Type1 Type2 ...   (types of dynid_msgs.msg)
"""

import sys

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.qos import QoSDurabilityPolicy, QoSProfile, QoSReliabilityPolicy

import dynid_msgs.msg

QOS = QoSProfile(
    depth=10,
    reliability=QoSReliabilityPolicy.RELIABLE,
    durability=QoSDurabilityPolicy.TRANSIENT_LOCAL,
)


def main() -> None:
    rclpy.init()
    node = Node("dynid_echo")
    relays = []
    for name in sys.argv[1:]:
        msg_type = getattr(dynid_msgs.msg, name)
        pub = node.create_publisher(msg_type, f"{name}/out", QOS)
        relays.append(node.create_subscription(msg_type, f"{name}/in", pub.publish, QOS))
    node.get_logger().info("ready")
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
