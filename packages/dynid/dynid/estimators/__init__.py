"""Estimators: CSVGD, STEADY, LM, proprioceptive fit, residual contact learner."""
