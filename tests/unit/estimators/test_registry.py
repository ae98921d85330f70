"""The registry and resolver: one way to choose and configure an estimator."""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

import pytest
import yaml

from dynid.estimators import registry
from dynid.estimators.registry import (
    EstimatorDefaults,
    UnknownSettingError,
    accepted_settings,
    available_estimators,
    estimator_class,
    estimator_defaults,
    make_estimator,
    resolve_estimator,
)

PACKAGE_DEFAULTS = resources.files("dynid.estimators") / "defaults"


@pytest.mark.parametrize("name", available_estimators())
def test_every_estimator_has_a_defaults_file_its_constructor_takes(name: str) -> None:
    """The defaults file its class carries (``defaults/<name>.yaml`` of the package) names the
    estimator, sets only keywords its constructor takes, and builds it with those values."""
    path = estimator_class(name).defaults_file
    assert path == PACKAGE_DEFAULTS / f"{name}.yaml"
    cfg = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert cfg["name"] == name
    settings = cfg["settings"]
    assert set(settings) <= set(accepted_settings(name))
    assert {"max_iterations", "seed"} <= set(settings)
    assert estimator_defaults(name) == settings
    est = make_estimator(name, **settings)
    assert est.kind == name
    assert (est.max_iterations, est.seed) == (settings["max_iterations"], settings["seed"])


def test_accepted_settings_follow_constructors_passing_settings_on() -> None:
    """Emcee takes ``stretch`` itself and ``num_particles`` through ``**settings`` from
    SamplerEstimator; SVGD takes CSVGD's ``learning_rate`` the same way; proprio has no
    ``num_particles``."""
    assert {"stretch", "init_jitter", "num_particles", "windows"} <= set(accepted_settings("emcee"))
    assert "learning_rate" not in accepted_settings("emcee")
    assert {"shooting", "learning_rate", "bandwidth"} <= set(accepted_settings("svgd"))
    assert "num_particles" not in accepted_settings("proprio")
    assert "lr" in accepted_settings("proprio")


def test_problem_file_settings_apply_only_to_the_estimator_they_name() -> None:
    problem = EstimatorDefaults("csvgd", {"num_particles": 5, "learning_rate": 0.3, "seed": 7})
    own = resolve_estimator(None, problem)  # the problem file's estimator
    assert own.name == "csvgd"
    assert (own.estimator.num_particles, own.estimator.learning_rate) == (5, 0.3)
    assert own.settings["seed"] == 7
    other = resolve_estimator("emcee", problem)  # another one: its own defaults only
    assert other.name == "emcee"
    assert dict(other.settings) == estimator_defaults("emcee")
    assert "learning_rate" not in other.settings
    assert (other.estimator.num_particles, other.estimator.seed) == (64, 0)
    counts = EstimatorDefaults("csvgd", {"num_particles": 5, "seed": 7})
    for name in ("svgd", "proprio", "cem"):
        resolved = resolve_estimator(name, counts)
        assert dict(resolved.settings) == estimator_defaults(name), name


def test_overrides_win_over_the_problem_file_and_the_defaults() -> None:
    problem = EstimatorDefaults("csvgd", {"num_particles": 5, "learning_rate": 0.3})
    resolved = resolve_estimator("csvgd", problem, {"num_particles": 9, "seed": 4})
    assert resolved.settings["num_particles"] == 9
    assert resolved.settings["learning_rate"] == 0.3
    assert resolved.settings["seed"] == 4
    assert resolved.settings["multiplier_lr"] == estimator_defaults("csvgd")["multiplier_lr"]
    rebuilt = resolved.build()
    assert rebuilt is not resolved.estimator
    assert (rebuilt.num_particles, rebuilt.learning_rate, rebuilt.seed) == (9, 0.3, 4)


def test_defaults_are_read_from_the_defaults_file(tmp_path: Path, monkeypatch) -> None:
    """A value changed in (a copy of) csvgd.yaml is what the resolver builds with, under the
    problem file's and the overrides' values."""
    cfg = yaml.safe_load((PACKAGE_DEFAULTS / "csvgd.yaml").read_text(encoding="utf-8"))
    cfg["settings"].update(num_particles=17, learning_rate=0.123, multiplier_lr=0.02)
    copy = tmp_path / "csvgd.yaml"
    copy.write_text(yaml.safe_dump(cfg))
    monkeypatch.setattr(estimator_class("csvgd"), "defaults_file", copy)
    resolved = resolve_estimator("csvgd")
    assert resolved.estimator.num_particles == 17
    assert resolved.estimator.learning_rate == 0.123
    assert resolved.estimator.mdmm.multiplier_lr == 0.02
    problem = EstimatorDefaults("csvgd", {"learning_rate": 0.3})
    resolved = resolve_estimator(None, problem, {"num_particles": 3})
    assert (resolved.estimator.num_particles, resolved.estimator.learning_rate) == (3, 0.3)
    assert resolved.estimator.mdmm.multiplier_lr == 0.02


def test_a_broken_defaults_file_is_named(tmp_path: Path, monkeypatch) -> None:
    cem = tmp_path / "cem.yaml"
    cem.write_text("name: cem\nsettings: {num_particles: 8, wings: 2}\n")
    monkeypatch.setattr(estimator_class("cem"), "defaults_file", cem)
    monkeypatch.setattr(estimator_class("nuts"), "defaults_file", tmp_path / "nuts.yaml")
    with pytest.raises(UnknownSettingError, match=r"estimator cem: unknown setting 'wings'"):
        resolve_estimator("cem")
    with pytest.raises(registry.EstimatorError, match=r"estimator nuts: defaults file .*missing"):
        resolve_estimator("nuts")


def test_an_unknown_setting_is_one_line_naming_it_before_building(monkeypatch) -> None:
    emcee = estimator_class("emcee")
    built = []
    original = emcee.__init__

    @functools.wraps(original)
    def spy(self, *args, **kwargs) -> None:
        built.append(kwargs)
        original(self, *args, **kwargs)

    monkeypatch.setattr(emcee, "__init__", spy)
    with pytest.raises(UnknownSettingError) as info:
        resolve_estimator("emcee", None, {"learning_rate": 0.01})
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("estimator emcee: unknown setting 'learning_rate' (accepted: ")
    assert "num_particles" in message
    assert "stretch" in message
    assert info.value.settings == ("learning_rate",)
    assert not built  # rejected before the constructor ran
    resolve_estimator("emcee", None, {"stretch": 1.5})
    assert len(built) == 1
    proprio = r"^estimator proprio: unknown setting 'num_particles' \(accepted: initial, lr, max_"
    with pytest.raises(UnknownSettingError, match=proprio):
        resolve_estimator("proprio", None, {"num_particles": 8})


def test_values_the_constructor_rejects_name_the_estimator() -> None:
    with pytest.raises(registry.EstimatorError, match=r"^estimator csvgd: .*num_particles"):
        resolve_estimator("csvgd", None, {"num_particles": 0})
    with pytest.raises(registry.EstimatorError, match=r"^estimator proprio: .*optimizer"):
        resolve_estimator("proprio", None, {"optimizer": "sgd"})


def test_unknown_or_missing_estimator_name() -> None:
    with pytest.raises(registry.UnknownEstimatorError, match=r"unknown estimator 'oracle'"):
        resolve_estimator("oracle")
    with pytest.raises(registry.UnknownEstimatorError, match=r"no estimator chosen"):
        resolve_estimator(None)


def test_integer_settings_refuse_values_that_are_not_integers() -> None:
    """``num_particles: 2.5`` was cut to 2 somewhere inside; every setting a constructor
    annotates ``int`` (``int | None``) now takes integers only (an integral float is that int)."""
    ints = registry.integer_settings("csvgd")
    assert [ints[k] for k in ("num_particles", "max_iterations", "seed", "windows")] == [
        False, False, False, True,
    ]  # fmt: skip
    assert "learning_rate" not in registry.integer_settings("csvgd")
    for name, key, value in [
        ("csvgd", "num_particles", 2.5),
        ("csvgd", "max_iterations", "10"),
        ("csvgd", "seed", True),
        ("csvgd", "windows", float("nan")),
        ("emcee", "num_particles", [4]),
        ("proprio", "starts", 1.5),
    ]:
        with pytest.raises(registry.InvalidSettingError) as info:
            resolve_estimator(name, None, {key: value})
        message = str(info.value)
        assert "\n" not in message
        assert message.startswith(f"estimator {name}: setting {key!r} must be an integer")
        assert info.value.settings == (key,)
    problem = EstimatorDefaults("csvgd", {"num_particles": 2.5})
    with pytest.raises(registry.InvalidSettingError, match=r"'num_particles' .* got 2.5$"):
        resolve_estimator(None, problem)
    resolved = resolve_estimator("csvgd", None, {"num_particles": 6.0, "windows": None})
    assert resolved.settings["num_particles"] == 6
    assert isinstance(resolved.settings["num_particles"], int)
    assert resolved.estimator.num_particles == 6
