"""Baseline estimators run through the same Problem interface."""
