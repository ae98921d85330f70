"""dynid_bringup: launch files, parameter YAML and RViz configuration for dynid."""
