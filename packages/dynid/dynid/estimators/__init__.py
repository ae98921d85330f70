"""Estimators: every identification method, behind one interface.

Each estimator is a subclass of :class:`dynid.estimators.base.Estimator` over one
:class:`~dynid.problem.Problem`, registered as an entry point of group ``dynid.estimators`` and
chosen by name through :mod:`dynid.estimators.registry` (``available_estimators()`` lists them;
``resolve_estimator`` builds one from its defaults file, a problem file's settings and
overrides). dynid's own defaults files are ``defaults/<name>.yaml`` here; baselines live in
:mod:`dynid.estimators.baselines`.
"""
