"""Recorded operator programs: replays equal the Python code to the bit, or are refused."""

from __future__ import annotations

import warnings
import weakref

import pytest
import torch

from dynid.model import op_replay
from dynid.model.attachments import attach_universal_box
from dynid.model.dynamics import TorchDynamics
from dynid.model.integrate import TorqueControl, rollout
from dynid.model.op_replay import OpProgram, ProgramCache, ReplayWarning, record
from dynid.model.params import DynamicParameters, nominal_parameters
from dynid.model.robot import load_robot
from dynid.model.spatial import dynamic_params_from_log_cholesky, log_cholesky_from_dynamic_params


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _buffered(scratch: dict[str, torch.Tensor]):
    """x ↦ sin(x[:, 0]) · x[:, 1] + x.T.sum(0) through a reused buffer, views and fresh tensors."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        buf = scratch.setdefault("prod", x.new_empty(x.shape[0]))
        torch.mul(torch.sin(x[:, 0]), x[:, 1], out=buf)
        return buf + x.T.sum(0)

    return fn


def test_replay_equals_the_code_on_new_inputs_and_keeps_only_computing_calls():
    scratch: dict[str, torch.Tensor] = {}
    fn = _buffered(scratch)
    x = torch.randn(5, 2, generator=_gen(0), dtype=torch.float64)
    fn(x)  # allocates the buffer
    result, program = record(fn, [x])
    assert program is not None
    assert torch.equal(result, fn(x))
    # sin, mul, sum, add: the views x[:, 0], x[:, 1] and x.T are not replayed
    assert len(program) == 4
    y = torch.randn(5, 2, generator=_gen(1), dtype=torch.float64)
    replayed = program.run(y)
    assert replayed is result  # the program's own output, overwritten
    assert torch.equal(replayed, fn(y))


def _chain(scratch: dict[str, torch.Tensor]):
    """x ↦ a chain of elementwise steps, each into its own reused buffer (like the dynamics)."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        y = x
        for i in range(6):
            buf = scratch.setdefault(f"step{i}", torch.empty_like(x))
            torch.addcmul(y, y, y.cos(), value=0.1, out=buf)
            y = buf
        return y.sum(0)

    return fn


def test_planned_intermediates_share_memory_and_replay_to_the_bit():
    fn = _chain({})
    x = torch.randn(64, 8, generator=_gen(7), dtype=torch.float64)
    fn(x)
    result, planned = record(fn, [x], plan=True)
    _, unplanned = record(fn, [x])
    assert planned is not None
    assert unplanned is not None
    # six buffers and six cos temporaries, at most three alive at once
    assert planned.footprint < 0.6 * unplanned.footprint
    for seed in (8, 9):
        y = torch.randn(64, 8, generator=_gen(seed), dtype=torch.float64)
        assert torch.equal(planned.run(y), fn(y))
    assert planned.run(y) is result  # the output stays where the code put it


def test_a_planned_replay_reading_memory_it_did_not_write_falls_back_to_the_buffers():
    scratch: dict[str, torch.Tensor] = {}

    def fn(x: torch.Tensor) -> torch.Tensor:  # writes half of a buffer, reads all of it
        if "half" not in scratch:
            scratch["half"] = torch.ones(2 * x.shape[0], dtype=x.dtype)
        torch.mul(x, 2.0, out=scratch["half"][: x.shape[0]])
        return scratch["half"].sum(0, keepdim=True) * 1.0

    x = torch.randn(5, generator=_gen(10), dtype=torch.float64)
    fn(x)
    _, program = record(fn, [x], plan=True)
    _, unplanned = record(fn, [x])
    assert program is not None
    assert unplanned is not None
    assert program.footprint == unplanned.footprint  # the planned arena was refused
    y = torch.randn(5, generator=_gen(11), dtype=torch.float64)
    assert torch.equal(program.run(y), fn(y))  # the ones still count


def test_a_value_read_into_python_refuses_the_recording():
    def fn(x: torch.Tensor) -> torch.Tensor:
        return x * 2.0 if float(x.sum()) > 0.0 else x * 3.0

    x = torch.ones(3, dtype=torch.float64)
    result, program = record(fn, [x])
    assert program is None
    assert torch.equal(result, 2.0 * x)


def test_a_replay_that_differs_from_the_recording_gives_no_program():
    total = torch.zeros(3, dtype=torch.float64)

    def accumulate(x: torch.Tensor) -> torch.Tensor:  # state outside the inputs: not replayable
        total.add_(x)
        return total * 1.0

    x = torch.ones(3, dtype=torch.float64)
    result, program = record(accumulate, [x])
    assert program is None
    assert torch.equal(result, total)  # the code's own result, not the replay's


def test_an_input_passed_again_is_copied_again_only_when_written_since():
    fn = _buffered({})
    x = torch.randn(5, 2, generator=_gen(2), dtype=torch.float64)
    fn(x)
    _, program = record(fn, [x])
    assert program is not None
    y = torch.randn(5, 2, generator=_gen(3), dtype=torch.float64)
    program.run(y)
    program.inputs[0].zero_()  # marks the program's copy: a skipped copy replays on zeros
    zeros = torch.zeros_like(y)
    assert torch.equal(program.run(y), fn(zeros))  # same tensor, same version: not copied
    assert torch.equal(program.run(y.clone()), fn(y))  # another tensor: copied
    program.run(y)
    program.inputs[0].zero_()
    y.mul_(2.0)  # written in place: version counter bumped, copied
    assert torch.equal(program.run(y), fn(y))
    program.inputs[0].zero_()
    y[:, 1].neg_()  # written through a view: the same counter
    assert torch.equal(program.run(y), fn(y))
    program.inputs[0].zero_()
    y.data = torch.randn(5, 2, generator=_gen(7), dtype=torch.float64)  # other memory
    assert torch.equal(program.run(y), fn(y))
    gone = weakref.ref(y)
    del y
    assert gone() is None  # the program does not keep its inputs (nor their graphs) alive


def test_a_program_that_writes_its_inputs_copies_them_at_every_run():
    def fn(x: torch.Tensor) -> torch.Tensor:
        return x.mul_(2.0).sin()

    x = torch.randn(4, generator=_gen(4), dtype=torch.float64)
    _, program = record(fn, [x])
    assert program is not None
    expected = torch.sin(2.0 * x)
    assert torch.equal(program.run(x), expected)
    assert torch.equal(program.run(x), expected)  # its doubled copy is not reused


def test_program_cache_runs_records_then_replays_and_keeps_refused_keys_on_the_code():
    calls = []
    scratch: dict[str, torch.Tensor] = {}
    inner = _buffered(scratch)

    def fn(x: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return inner(x)

    cache = ProgramCache()
    xs = [torch.randn(4, 2, generator=_gen(k), dtype=torch.float64) for k in range(4)]
    results = [cache.run("k", fn, [x]).clone() for x in xs]
    # first call: the code, second: the code recorded, then replays
    assert len(calls) == 2
    assert cache.recorded() == ["k"]
    for x, r in zip(xs, results, strict=True):
        assert torch.equal(r, inner(x))

    def data_dependent(x: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return x.abs() if bool((x > 0).any()) else x

    calls.clear()
    for x in xs:
        assert torch.equal(cache.run("d", data_dependent, [x]), x.abs())
    assert len(calls) == 4 + 1  # every call runs the code (the refused recording twice)
    assert cache.recorded() == ["k"]


def _failing_recording(monkeypatch: pytest.MonkeyPatch) -> None:
    """Recording raises halfway through the code, as a changed torch internal would."""

    def no_schema(func, n_outputs):
        raise AttributeError("'OpOverload' object has no attribute '_schema'")

    monkeypatch.setattr(op_replay, "_out_overload", no_schema)


def _failing_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    """A replay raises after it copied NaN inputs in and ran every call: the program's inputs,
    intermediates and outputs (and the code's buffers it writes) hold NaN when it fails."""
    run = OpProgram.run

    def broken(self: OpProgram, *inputs: torch.Tensor):
        run(self, *(torch.full_like(x, float("nan")) for x in inputs))
        raise RuntimeError("replay broke")

    monkeypatch.setattr(OpProgram, "run", broken)


_RAISED = {"recording": "AttributeError", "replaying": "RuntimeError"}


@pytest.mark.parametrize("stage", ["recording", "replaying"])
def test_a_failing_recording_or_replay_runs_the_code_warned_once_and_from_then_on(
    monkeypatch, stage
):
    monkeypatch.setattr(op_replay, "_warned", set())
    calls = []
    inner = _buffered({})

    def fn(x: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return inner(x)

    cache = ProgramCache()
    xs = [torch.randn(4, 2, generator=_gen(20 + k), dtype=torch.float64) for k in range(5)]
    expected = [inner(x).clone() for x in xs]
    keys = ["a", "b"]
    for key in keys:
        cache.run(key, fn, [xs[0]])  # the code
    if stage == "replaying":
        for key in keys:
            cache.run(key, fn, [xs[0]])
        assert cache.recorded() == keys
        _failing_replay(monkeypatch)
    else:
        _failing_recording(monkeypatch)
    with pytest.warns(ReplayWarning, match=f"^{stage} .* failed \\({_RAISED[stage]}: ") as caught:
        results = [cache.run(key, fn, [x]) for key, x in zip(keys, xs[1:3], strict=True)]
    assert all(torch.equal(r, e) for r, e in zip(results, expected[1:3], strict=True))
    assert len(caught) == 1  # one report per kind of failure
    calls.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for x, e in zip(xs[3:], expected[3:], strict=True):
            for key in keys:
                assert torch.equal(cache.run(key, fn, [x]), e)
    assert len(calls) == 2 * len(xs[3:])  # the code once per call, no new recording
    assert cache.recorded() == []


@pytest.fixture(scope="module")
def panda_box():
    return attach_universal_box(load_robot("panda"), "panda_link8", damping=0.05)


def _particles(robot, n: int, seed: int) -> DynamicParameters:
    p = nominal_parameters(robot, n)
    small = torch.tensor([1e-3, 0, 0, 0, 1e-5, 0, 1e-5, 0, 0, 1e-5], dtype=torch.float64)
    massless = (p.inertia[..., :1] <= 0.0).to(torch.float64)
    lc = log_cholesky_from_dynamic_params(p.inertia + massless * small)
    lc = lc + 0.1 * torch.randn(lc.shape, generator=_gen(seed), dtype=torch.float64)
    p.inertia = dynamic_params_from_log_cholesky(lc)
    p.damping = p.damping + 0.1
    p.coulomb = p.coulomb + 0.2
    return p


@pytest.mark.parametrize("n", [8, 600])  # LAPACK and in-place Cholesky (LAPACK_BELOW = 512)
def test_forward_dynamics_replays_equal_the_code_and_results_do_not_alias(panda_box, n):
    replayed = TorchDynamics(panda_box)
    code = TorchDynamics(panda_box, replay=False)
    p = _particles(panda_box, n, 1)
    gen = _gen(2)
    results = []
    with torch.no_grad():
        for _ in range(4):
            q, v, tau = (torch.randn(n, 9, generator=gen, dtype=torch.float64) for _ in range(3))
            qdd = replayed.forward_dynamics(p, q, v, tau)
            assert torch.equal(qdd, code.forward_dynamics(p, q, v, tau))
            results.append((qdd, qdd.clone()))
        # another smoothing is another program, not the recorded one
        smoother = TorchDynamics(panda_box, coulomb_smoothing=0.5)
        for _ in range(3):
            smooth = smoother.forward_dynamics(p, q, v, tau)
        assert not torch.equal(smooth, qdd)
    assert all(torch.equal(a, b) for a, b in results)  # earlier results not overwritten
    assert len(replayed._space(q, n).programs.recorded()) == 1


def test_checkpointed_rollout_gradients_with_replay_equal_the_code(panda_box):
    n, steps = 6, 12
    p0 = _particles(panda_box, n, 3)
    gen = _gen(4)
    q0, v0 = (0.3 * torch.randn(n, 9, generator=gen, dtype=torch.float64) for _ in range(2))
    u = 0.5 * torch.randn(1, steps, 9, generator=gen, dtype=torch.float64)

    def gradients(dyn: TorchDynamics) -> list[torch.Tensor]:
        inertia = p0.inertia.clone().requires_grad_(True)
        damping = p0.damping.clone().requires_grad_(True)
        v_start = v0.clone().requires_grad_(True)
        p = DynamicParameters(**{**p0.__dict__, "inertia": inertia, "damping": damping})
        q, v = rollout(dyn, p, q0, v_start, u, 1e-2, TorqueControl(), checkpoint_every=4)
        (q[..., -1, :].square().sum() + v.sin().sum()).backward()
        return [inertia.grad, damping.grad, v_start.grad]

    replayed = TorchDynamics(panda_box, check_inputs=False)
    code = TorchDynamics(panda_box, check_inputs=False, replay=False)
    for _ in range(2):  # the second pass replays what the first recorded
        for a, b in zip(gradients(replayed), gradients(code), strict=True):
            assert torch.equal(a, b)
    kinds = [key[0] for key in replayed._space(q0, n).programs.recorded()]
    # the gradient-free first pass (q̈ alone), the passes into recycled tapes, their vjp
    assert set(kinds) == {"qdd", "solve", "vjp"}
    assert kinds.count("solve") > 1


@pytest.mark.parametrize("replay", [False, True])
def test_inference_mode_and_no_grad_calls_alternate(panda_box, replay):
    dyn = TorchDynamics(panda_box, replay=replay)
    p = _particles(panda_box, 4, 5)
    gen = _gen(6)
    q, v, tau = (torch.randn(4, 9, generator=gen, dtype=torch.float64) for _ in range(3))
    results = []
    for _ in range(3):
        with torch.inference_mode():
            results.append(dyn.forward_dynamics(p, q, v, tau).clone())
        with torch.no_grad():  # buffers made in inference mode cannot be written here
            results.append(dyn.forward_dynamics(p, q, v, tau))
    assert all(torch.equal(r, results[0]) for r in results)


def test_release_buffers_returns_the_memory_and_later_calls_rebuild_it(panda_box):
    dyn = TorchDynamics(panda_box)
    p = _particles(panda_box, 300, 7)
    gen = _gen(8)
    q, v, tau = (torch.randn(300, 9, generator=gen, dtype=torch.float64) for _ in range(3))
    with torch.no_grad():
        first = [dyn.forward_dynamics(p, q, v, tau) for _ in range(3)]
        space = dyn._space(q, 300)
        assert space.programs.recorded()
        buffers = [weakref.ref(t) for t in space.tensors.values()]
        assert buffers
        del space
        dyn.release_buffers()
        assert all(ref() is None for ref in buffers)  # nothing holds them any more
        again = [dyn.forward_dynamics(p, q, v, tau) for _ in range(3)]
    assert all(torch.equal(a, first[0]) for a in first + again)


@pytest.mark.parametrize("stage", ["recording", "replaying"])
def test_forward_dynamics_equals_the_code_when_its_replay_fails(panda_box, monkeypatch, stage):
    monkeypatch.setattr(op_replay, "_warned", set())
    replayed = TorchDynamics(panda_box)
    code = TorchDynamics(panda_box, replay=False)
    p = _particles(panda_box, 8, 12)
    gen = _gen(13)
    states = [
        [torch.randn(8, 9, generator=gen, dtype=torch.float64) for _ in range(3)] for _ in range(3)
    ]
    with torch.no_grad():
        expected = [code.forward_dynamics(p, *s) for s in states]
        assert torch.equal(replayed.forward_dynamics(p, *states[0]), expected[0])
        if stage == "replaying":
            assert torch.equal(replayed.forward_dynamics(p, *states[0]), expected[0])
            assert replayed._space(states[0][0], 8).programs.recorded()
            _failing_replay(monkeypatch)
        else:
            _failing_recording(monkeypatch)
        with pytest.warns(ReplayWarning, match=f"^{stage} .* failed \\({_RAISED[stage]}: "):
            results = [replayed.forward_dynamics(p, *s) for s in states]
    assert all(torch.equal(r, e) for r, e in zip(results, expected, strict=True))
    assert replayed._space(states[0][0], 8).programs.recorded() == []


def test_rollout_gradients_equal_the_code_when_their_replays_fail(panda_box, monkeypatch):
    monkeypatch.setattr(op_replay, "_warned", set())
    n, steps = 4, 8
    p0 = _particles(panda_box, n, 14)
    gen = _gen(15)
    q0, v0 = (0.3 * torch.randn(n, 9, generator=gen, dtype=torch.float64) for _ in range(2))
    u = 0.5 * torch.randn(1, steps, 9, generator=gen, dtype=torch.float64)

    def gradients(dyn: TorchDynamics) -> list[torch.Tensor]:
        inertia = p0.inertia.clone().requires_grad_(True)
        p = DynamicParameters(**{**p0.__dict__, "inertia": inertia})
        q, _ = rollout(dyn, p, q0, v0, u, 1e-2, TorqueControl(), checkpoint_every=4)
        q[..., -1, :].square().sum().backward()
        return [q.detach(), inertia.grad]

    replayed = TorchDynamics(panda_box, check_inputs=False)
    expected = gradients(TorchDynamics(panda_box, check_inputs=False, replay=False))
    gradients(replayed)  # records the forward passes and their vector-Jacobian products
    assert replayed._space(q0, n).programs.recorded()
    _failing_replay(monkeypatch)
    with pytest.warns(ReplayWarning, match="replaying"):
        results = gradients(replayed)
    assert all(torch.equal(r, e) for r, e in zip(results, expected, strict=True))
    assert replayed._space(q0, n).programs.recorded() == []
