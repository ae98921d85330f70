"""Problem files: one YAML file describes an identification problem end to end.

``load_problem(path, bag=...)`` reads a problem file, checks every key and returns a
:class:`dynid.problem.Problem` plus the estimator defaults. Every error is a
:class:`ProblemFileError` whose one-line message names the file and the key (``robot.urdf``,
``parameters[2].name``, ``data.joint_states.topic``, ``estimator.name`` ...). YAML is read with
``yaml.safe_load`` only; relative paths are relative to the problem file's directory.

Schema (top-level keys; only ``robot``, ``parameters`` and ``data`` are required)::

    name: panda_box                    # short name for reports and files (default: file stem)
    description: free text             # optional

    robot:                             # exactly one of name / urdf
      name: panda                      # dynid.model.robot.load_robot name: panda,
                                       #   open_manipulator_x, double_pendulum, furuta
      # urdf: ../robots/my_robot.urdf  # or a URDF file
      locked_joints: {}                # joint -> fixed position (rad or m)
      gravity: [0.0, 0.0, -9.81]       # m/s², world frame

    attachments:                       # optional, applied in order (dynid.model.attachments)
      - type: universal_box            # attach_universal_box(robot, flange_frame, ...)
        flange_frame: panda_link8
        box_mass: 0.920                # kg
        size: [0.30, 0.18, 0.30]       # m
        weights: 2
        weight_mass: 0.5               # kg
        weight_positions: [[-0.05, 0.0], [0.05, 0.0]]   # m, nominal (x, y) on the floor
        damping: 0.0                   # N·m·s/rad, scalar or [2]
        name: box                      # parameter prefix: box/weight1_x, box/com_z, ...
      # - type: payload                # attach_payload(robot, link, mass, com, inertia, name)
      #   link: end_effector_link
      #   mass: 0.05                   # kg
      #   com: [0.0, 0.0, 0.0]         # m, link frame
      #   inertia: [[1e-5, 0, 0], [0, 1e-5, 0], [0, 0, 1e-5]]   # kg·m², optional
      # - type: sphere_in_container    # sphere_in_container(robot, container_frame, ...)
      #   container_frame: link5
      #   inner_size: [0.1, 0.1, 0.1]  # m
      #   radius: 0.0225               # m
      #   mass: 0.05                   # kg
      #   stiffness: 1.0e4             # N/m
      #   damping: 10.0                # N·s/m
      #   friction_stiffness: 10.0     # N·s/m
      #   friction: 0.5
      #   axes: xz                     # optional: cavity_center, rolling, name

    parameters:                        # dynid.model.params.ParameterSpec.from_yaml entries;
      - {name: box/weight1_x, lower: -0.14, upper: 0.14, unit: m}   # names are checked
      - {name: box/weight1_y, lower: -0.08, upper: 0.08, unit: m}   # against the robot and
      - {name: box/weight2_x, lower: -0.14, upper: 0.14, unit: m}   # its attachments
      - {name: box/weight2_y, lower: -0.08, upper: 0.08, unit: m,
         prior: gaussian, mean: 0.0, std: 0.05}

    truth: {box/weight1_x: -0.08}      # optional known values (synthetic data), shown in reports

    data:
      source: bag                      # bag (default) | npz | ibm_pendulum | scenario
      # --- source: bag (path from `dynid fit --bag`, else data.path) ---------------------
      path: ../../build/panda_box.mcap # optional default bag
      joint_states:                    # dynid.data.JointStateTopic
        topic: /joint_states
        joints: [panda_joint1, panda_joint2]   # default: every joint of the robot
        effort_scale: {}               # joint -> factor from raw effort to N·m
      mocap:                           # dynid.data.MocapTopic: channels <body>/x|y|z|qx|qy|qz|qw
        - {body: box, topic: /vicon/box/box, msgtype: geometry_msgs/msg/PoseStamped}
      tf: []                           # dynid.data.TfLookup: {body, parent, child, topic}
      commands:                        # dynid.data.CommandTopic
        - {topic: /desired_joint_states, msgtype: sensor_msgs/msg/JointState,
           label: desired, fields: [position, velocity]}
      stamps: header                   # header | receive
      rate: null                       # Hz: resample onto a uniform grid while reading
      # --- source: npz -------------------------------------------------------------------
      # path: recording.npz            # dynid.data.Dataset.save_npz file
      # --- source: ibm_pendulum (the real IBM double-pendulum recordings) ----------------
      # runs: [0]                      # run numbers; start: 0; max_samples: 400
      # --- source: scenario (simulate on the fly with dynid.sim) -------------------------
      # scenario: panda_box            # dynid.sim scenario name
      # settings: {seed: 0}            # keyword arguments of the scenario
      # --- preprocessing (every source), applied in this order ---------------------------
      window: [0.0, 4.0]               # s: keep this time range of each trajectory
      lowpass_hz: null                 # zero-phase Butterworth (dynid.data.preprocess)
      velocities: measured             # measured | central | backward | forward: fill or
                                       #   recompute dq by finite differences
      dt: 0.01                         # s: simulator step; data are downsampled onto it
      split: null                      # s: cut each trajectory into pieces of this length
      trajectories: null               # indices of the trajectories to keep (after split)

    control:                           # how the recorded inputs drive the simulation
      type: pd                         # torque | current | pd | none (unactuated)
      actuated: [panda_joint1, ...]    # joints driven, in input order (default: all joints)
      inputs: [desired/panda_joint1/position, ..., desired/panda_joint1/velocity, ...]
                                       # command channels fed as u (torque default: [effort],
                                       #   the measured joint efforts)
      kp: [600, 600, 600, 600, 250, 150, 50]   # pd: N·m/rad, scalar or per actuated joint
      kd: [50, 50, 50, 20, 20, 20, 10]         # pd: N·m·s/rad
      # torque_constant: 1.0           # current: N·m per unit (omit: <joint>/motor_gain)

    observe:                           # which channels the likelihood compares
      joints: all                      # all | [names] | none: "<joint>/position"
      velocities: false                # also "<joint>/velocity"
      frame_points:                    # mocap points fixed on frames, "<frame>/<point>/x|y|z";
        - frame: box                   #   computed from the pose of mocap body `body`
          body: box                    #   (default: the frame name) when the data lack them
          points: [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]   # m, frame coords (default)
      frame_poses: []                  # frames observed as poses "<frame>/x|y|z|qx|qy|qz|qw"

    likelihood:                        # dynid.problem.LikelihoodSettings
      obs_std: 0.01                    # scalar or one per observed channel (channel units)
      shooting: multiple               # single | multiple
      windows: 10
      defect_std: 0.1
      aggregate: sum                   # sum | product

    simulation:
      substeps: 1                      # integrator substeps per data step
      backend: torch                   # torch | pinocchio
      device: cpu                      # torch device (dynid fit --device overrides)

    estimator:                         # defaults for `dynid fit` (its flags override them)
      name: csvgd                      # dynid.estimators.base.available_estimators()
      settings: {num_particles: 32, max_iterations: 300, learning_rate: 0.01, seed: 0}
"""
