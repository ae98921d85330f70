"""Estimators: every identification method, behind one interface.

Each estimator is a subclass of :class:`dynid.estimators.base.Estimator` over one
:class:`~dynid.problem.Problem`, chosen by name through :mod:`dynid.estimators.registry`
(``available_estimators()`` lists them; ``resolve_estimator`` builds one from its defaults in
``dynid/estimators/defaults/<name>.yaml``, a problem file's settings and overrides). Baselines
live in :mod:`dynid.estimators.baselines`.
"""
