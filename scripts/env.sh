# Put the current shell into dynid's environment: `source scripts/env.sh` (bash or zsh).
# Activates the virtualenv, makes it an ament prefix (the ROS 2 wheels live there) and overlays
# the colcon workspace with dynid_msgs, dynid_ros and dynid_bringup.
_dynid_root="$(cd "$(dirname "${BASH_SOURCE[0]:-${(%):-%x}}")/.." && pwd)"
_dynid_venv="${DYNID_VENV:-$_dynid_root/.venv}"
if [ ! -f "$_dynid_venv/bin/activate" ]; then
  echo "dynid: no environment at $_dynid_venv; run scripts/setup first" >&2
  return 1 2>/dev/null || exit 1
fi
# shellcheck source=/dev/null
. "$_dynid_venv/bin/activate"
case ":${AMENT_PREFIX_PATH:-}:" in
  *":$_dynid_venv:"*) ;;
  *) export AMENT_PREFIX_PATH="$_dynid_venv${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}" ;;
esac
if [ -f "$_dynid_root/ros2_ws/install/local_setup.bash" ]; then
  # colcon's scripts read unset variables: relax `set -u` while sourcing them
  case $- in *u*) _dynid_nounset=1; set +u ;; *) _dynid_nounset=0 ;; esac
  # shellcheck source=/dev/null
  . "$_dynid_root/ros2_ws/install/local_setup.bash"
  [ "$_dynid_nounset" = 1 ] && set -u
  unset _dynid_nounset
fi
export RMW_IMPLEMENTATION="${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}"
export DYNID_ROOT="$_dynid_root"
unset _dynid_root _dynid_venv
