#!/usr/bin/env bash
# Source ROS 2, dynid's virtualenv and the dynid workspace overlay, then run the command.
set -e
# shellcheck source=/dev/null
source "/opt/ros/${ROS_DISTRO}/setup.bash"
# shellcheck source=/dev/null
source "${DYNID_VENV}/bin/activate"
# shellcheck source=/dev/null
source "${DYNID_WS}/install/setup.bash"
exec "$@"
