"""Robot models: URDF loading, parameter specs, batched torch dynamics, Pinocchio backend."""
