"""Record the aten calls of a buffer-writing computation once, replay them without Python.

The forward pass of :class:`~dynid.model.dynamics.TorchDynamics` writes every intermediate into
reused scratch buffers, so two calls with inputs of the same shapes run the same aten operators
on the same tensors. On a CPU a large part of such a call is the Python around those operators
(building views, term lists, argument parsing).
An :class:`OpProgram` keeps only what changes memory: at recording, each operator that computes
something is kept with its arguments, and one that returns a fresh tensor is turned into its
``out=`` overload writing into the tensor it returned then; operators that only make views are
dropped, since the views they made are the very tensors the kept calls hold (so are those that
only allocate uninitialised memory). Replaying the program is one loop over the kept calls: the
same kernels on the same memory, so the results are bitwise those of the Python code (checked
once at recording). Each kept call goes through torch's Python function of the operator where
that does the same on copies of the recorded arguments (its argument parser is cheaper than the
operator's schema matching). This is the CPU counterpart of capturing a CUDA graph, with the
same contract: inputs are copied into the program's own input tensors before a replay (unless
the same tensor, unmodified, was copied in by the previous one), and its outputs are overwritten
by the next replay.

A computation whose result is all that is read afterwards can also have its intermediates
planned into a shared arena (``plan``, :func:`_planned`): buffers whose lifetimes in the call
sequence do not overlap take the same memory, as a compiler's memory planner does. The kernels
of such a replay are bound by memory traffic, not arithmetic, so touching fewer bytes, and
writing into memory that the previous intermediate left in cache, is what makes them faster.

A computation cannot be recorded (:func:`record` returns no program and the caller stays with
the Python code) when an operator reads tensor values into Python (``.item()``, ``nonzero``: the
control flow could depend on the data) or has no ``out=`` overload.

Recording and replaying rest on torch internals that are not public API (the dispatch mode of
``torch.utils._python_dispatch``, ``OpOverload._schema``, ``Tensor._version``, and
``torch._C._functorch`` in :func:`transformed`); this module is the only one in dynid that uses
them. The torch requirement is bounded above by the minor version that CI tests, and
:class:`ProgramCache` guards every recording and replay: whatever one raises, the computation
runs the Python code on the caller's inputs instead, its program is discarded, and a
:class:`ReplayWarning` says so once per kind of failure.
"""

from __future__ import annotations

import logging
import warnings
import weakref
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import torch
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["OpProgram", "ProgramCache", "ReplayWarning", "Stage", "record", "transformed"]

_log = logging.getLogger(__name__)

_DATA_DEPENDENT = {
    torch.ops.aten._local_scalar_dense.default,
    torch.ops.aten.nonzero.default,
    torch.ops.aten.masked_select.default,
    torch.ops.aten.is_nonzero.default,
}

_ALLOCATING = {
    torch.ops.aten.empty.memory_format,
    torch.ops.aten.empty_like.default,
    torch.ops.aten.empty_strided.default,
    torch.ops.aten.new_empty.default,
    torch.ops.aten.new_empty_strided.default,
}
"""Operators that only allocate (uninitialised): their tensor is kept, nothing is replayed."""

Call = tuple[Any, tuple[Any, ...], dict[str, Any]]


class _UnrecordableError(Exception):
    """Raised inside the recording when an operator cannot be replayed."""


class ReplayWarning(RuntimeWarning):
    """Recording or replaying a computation failed; it runs the Python code from then on."""


def transformed(x: Tensor) -> bool:
    """Whether ``x`` is a tensor inside a ``torch.func`` transform (``vmap``, ``grad``, ``jvp``):
    such a tensor cannot be written in place into a plain buffer, nor recorded."""
    return torch._C._functorch.is_functorch_wrapped_tensor(x)


def _out_overload(func: Any, n_outputs: int) -> tuple[Any, list[str]] | None:
    """The ``out=`` overload of a functional aten operator with the same other arguments."""
    signature = [(a.name, str(a.type)) for a in func._schema.arguments]
    packet = func.overloadpacket
    for name in packet.overloads():
        overload = getattr(packet, name)
        args = overload._schema.arguments
        outs = [a.name for a in args if a.is_out]
        if len(outs) != n_outputs:
            continue
        if [(a.name, str(a.type)) for a in args if not a.is_out] == signature:
            return overload, outs
    return None


class _Recorder(TorchDispatchMode):
    """Runs the operators and keeps the calls that compute (see the module notes)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[Call] = []

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if func in _DATA_DEPENDENT:
            raise _UnrecordableError(f"{func} reads tensor values")
        result = func(*args, **kwargs)
        schema = func._schema
        if func in _ALLOCATING:
            pass
        elif schema.is_mutable or any(a.is_out for a in schema.arguments):
            self.calls.append((func, args, kwargs))
        elif not any(r.alias_info is not None for r in schema.returns):
            outputs = result if isinstance(result, tuple | list) else (result,)
            if not all(isinstance(x, Tensor) for x in outputs):
                raise _UnrecordableError(f"{func} returns a non-tensor")
            found = _out_overload(func, len(outputs))
            if found is None:
                raise _UnrecordableError(f"{func} has no out= overload")
            overload, names = found
            destinations = dict(zip(names, outputs, strict=True))
            self.calls.append((overload, args, {**kwargs, **destinations}))
        return result


def _binding(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Callable[..., Any]:
    """torch's Python function for an aten call if it does the same on copies of its arguments
    (its argument parsing costs about half of the operator's), else the operator itself."""
    name = func._schema.name.split("::")[-1]
    public = getattr(torch.Tensor if name.endswith("_") else torch, name, None)
    if public is None:
        return func
    mine, theirs = (_mapped((args, kwargs), Tensor.clone) for _ in range(2))
    try:
        func(*mine[0], **mine[1])
        public(*theirs[0], **theirs[1])
    except (TypeError, RuntimeError):
        return func
    return public if all(map(_same, _flat(mine), _flat(theirs))) else func


def _mapped(x: Any, f: Callable[[Tensor], Tensor]) -> Any:
    """``x`` with ``f`` applied to every tensor in it (in tuples, lists and dict values)."""
    if isinstance(x, Tensor):
        return f(x)
    if isinstance(x, dict):
        return {k: _mapped(v, f) for k, v in x.items()}
    if isinstance(x, tuple | list):
        return type(x)(_mapped(v, f) for v in x)
    return x


class OpProgram:
    """The recorded calls of one computation, with its input and output tensors.

    ``inputs``: the tensors the computation read (the program's own copies); ``outputs``: the
    tensors it returned, rewritten by every :meth:`run`; ``reads_only``: the calls never write
    ``inputs`` (so an input already copied in need not be copied again).
    """

    def __init__(
        self, calls: list[Call], inputs: Sequence[Tensor], outputs: Any, reads_only: bool = False
    ) -> None:
        self._calls = [(_binding(func, args, kwargs), args, kwargs) for func, args, kwargs in calls]
        self.inputs = list(inputs)
        self.outputs = outputs
        self._reads_only = reads_only
        self._copied: list[tuple[weakref.ref, int, int] | None] = [None] * len(self.inputs)

    def __len__(self) -> int:
        return len(self._calls)

    @property
    def footprint(self) -> int:
        """Bytes of the distinct storages that a replay touches."""
        storages = {
            x.untyped_storage().data_ptr(): x.untyped_storage().nbytes()
            for _, args, kwargs in self._calls
            for x in _flat([args, kwargs])
        }
        return sum(storages.values())

    def run(self, *inputs: Tensor) -> Any:
        """Copy ``inputs`` (the shapes recorded, any strides) in and replay; the outputs.

        When the recorded calls only read the program's inputs (``reads_only``, checked at
        recording), an input that is the very tensor copied in by the previous run, on the same
        memory and unmodified since (same version counter, as autograd checks), is not copied
        again: a rollout passes the same parameters at every step. Writes that bypass the
        version counter (through ``.data`` or a NumPy array sharing the memory) are not seen,
        as autograd does not see them.
        """
        for i, (mine, x) in enumerate(zip(self.inputs, inputs, strict=True)):
            copied = self._copied[i]
            if copied is not None and copied[0]() is x and copied[1:] == _state(x):
                continue
            mine.copy_(x)
            if self._reads_only and not x.is_inference():
                self._copied[i] = (weakref.ref(x), *_state(x))  # not keeping x, or its graph
        for func, args, kwargs in self._calls:
            func(*args, **kwargs)
        return self.outputs


def _state(x: Tensor) -> tuple[int, int]:
    """Where a tensor's memory is and how often it was written (its version counter)."""
    return x.data_ptr(), x._version


Stage = Callable[[Tensor], Tensor]
"""Makes the program's own (uninitialised) input tensor for an input: same shape, any layout."""


def record(
    fn: Callable[..., Any],
    inputs: Sequence[Tensor],
    stage: Sequence[Stage] | None = None,
    plan: bool = False,
) -> tuple[Any, OpProgram | None]:
    """Run ``fn(*copies of inputs)`` once, recording it; its result and the program, or None.

    ``fn`` must write its intermediates into tensors that outlive the call (scratch buffers):
    the program holds them. ``stage`` (one per input) lays out the program's own inputs
    (default: clones); a layout the code reads without rearranging saves it a copy. Its result
    (tensors, nested in tuples, lists or dicts) is compared with one replay on the same inputs
    (NaN matching NaN); any difference, or an operator that cannot be replayed, gives no
    program. ``plan``: let the intermediates share memory (:func:`_planned`; the program falls
    back to the recorded tensors if its replay differs). Only for a computation whose result
    is all that anyone reads afterwards: the planned replay no longer writes the code's
    buffers.
    """
    if stage is None:
        own = [x.detach().clone() for x in inputs]
    else:
        own = [make(x).copy_(x) for make, x in zip(stage, inputs, strict=True)]
    versions = [None if x.is_inference() else x._version for x in own]
    recorder = _Recorder()
    try:
        with torch.no_grad(), recorder:
            outputs = fn(*own)
    except _UnrecordableError:
        with torch.no_grad():
            return fn(*own), None
    expected = [x.clone() for x in _flat(outputs)]
    # inference tensors keep no version counter: whether the code writes them is unknown
    reads_only = not any(x.is_inference() for x in own) and versions == [x._version for x in own]
    planned = _planned(recorder.calls, [*own, *_flat(outputs)]) if plan else None
    for calls in (planned, recorder.calls):
        if calls is None:
            continue
        program = OpProgram(calls, own, outputs, reads_only)
        program.run(*inputs)
        if all(map(_same, expected, _flat(outputs))):
            return outputs, program
    with torch.no_grad():  # the replay went wrong: the code's own result
        return fn(*own), None


_OVERWRITING = {
    torch.ops.aten.copy_.default,
    torch.ops.aten.fill_.Scalar,
    torch.ops.aten.zero_.default,
}
"""In-place operators whose result does not depend on what their ``self`` held."""

_ALIGN = 64
"""Byte alignment of the intermediates in a planned arena (a cache line)."""


def _accesses(call: Call) -> list[tuple[Tensor, bool]]:
    """The tensors ``call`` touches, each with whether it reads it (False: only overwrites)."""
    func, args, kwargs = call
    found: list[tuple[Tensor, bool]] = []
    arguments = func._schema.arguments
    values = list(zip(arguments, args, strict=False)) + [
        (next(a for a in arguments if a.name == name), x) for name, x in kwargs.items()
    ]
    for argument, value in values:
        written = argument.alias_info is not None and argument.alias_info.is_write
        overwritten = written and (argument.is_out or func in _OVERWRITING)
        for x in value if isinstance(value, list | tuple) else (value,):
            if isinstance(x, Tensor):
                found.append((x, not overwritten))
    return found


def _planned(calls: list[Call], keep: Sequence[Tensor]) -> list[Call] | None:
    """The calls with their intermediates moved into one arena per dtype, in which storages
    whose lifetimes do not overlap share memory; None if none would.

    An intermediate is a storage that the calls overwrite before they read it and that no tensor
    of ``keep`` (the inputs and outputs) lies on. Its lifetime runs from that first write to its
    last access; offsets are assigned greedily, largest storage first, at the lowest offset clear
    of every placed storage whose lifetime overlaps. A replay then touches a few megabytes
    instead of every scratch buffer of the code, and memory freed by one intermediate is still in
    cache when the next one is written there. The arena starts as NaN, so a planned replay that
    read memory it had not written differs from the recording (:func:`record` checks).
    """
    kept = {x.untyped_storage().data_ptr() for x in keep}
    first: dict[int, bool] = {}  # storage → whether its first access reads it
    span: dict[int, list[int]] = {}  # storage → [first, last] call index
    views: dict[int, list[Tensor]] = {}
    for i, call in enumerate(calls):
        for x, reads in _accesses(call):
            key = x.untyped_storage().data_ptr()
            first.setdefault(key, reads)
            span.setdefault(key, [i, i])[1] = i
            views.setdefault(key, []).append(x)
    movable = [
        key
        for key in span
        if not first[key]
        and key not in kept
        and len({(x.dtype, x.device) for x in views[key]}) == 1
    ]
    if len(movable) < 2:
        return None
    placed: dict[int, int] = {}  # storage → byte offset in its arena
    size = {key: -(-views[key][0].untyped_storage().nbytes() // _ALIGN) * _ALIGN for key in movable}
    arena_of = {key: (views[key][0].dtype, views[key][0].device) for key in movable}
    for key in sorted(movable, key=lambda k: -size[k]):
        start, end = span[key]
        clashes = sorted(
            (placed[k], size[k])
            for k in placed
            if arena_of[k] == arena_of[key] and span[k][0] <= end and start <= span[k][1]
        )
        offset = 0
        for other, length in clashes:
            if offset + size[key] <= other:
                break
            offset = max(offset, other + length)
        placed[key] = offset
    totals: dict[tuple, int] = {}
    for key, offset in placed.items():
        totals[arena_of[key]] = max(totals.get(arena_of[key], 0), offset + size[key])
    if sum(totals.values()) >= sum(size.values()):
        return None
    arenas = {
        (dtype, device): torch.full(
            (total // dtype.itemsize,),
            float("nan") if dtype.is_floating_point else 0,
            dtype=dtype,
            device=device,
        )
        for (dtype, device), total in totals.items()
    }
    moved: dict[int, Tensor] = {}
    for key in movable:
        arena, base = arenas[arena_of[key]], placed[key] // arena_of[key][0].itemsize
        for x in views[key]:
            moved[id(x)] = arena.as_strided(x.shape, x.stride(), base + x.storage_offset())

    def move(x: Tensor) -> Tensor:
        return moved.get(id(x), x)

    return [(func, _mapped(args, move), _mapped(kwargs, move)) for func, args, kwargs in calls]


def _same(a: Tensor, b: Tensor) -> bool:
    """Equal to the bit where finite, NaN where the other is NaN."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not a.is_floating_point():
        return torch.equal(a, b)
    return bool(((a == b) | (a.isnan() & b.isnan())).all())


def _flat(x: Any) -> list[Tensor]:
    """The tensors of a result (tensors in tuples, lists and dict values), depth first."""
    if isinstance(x, Tensor):
        return [x]
    if isinstance(x, dict):
        x = list(x.values())
    if isinstance(x, tuple | list):
        return [t for item in x for t in _flat(item)]
    return []


_SEEN = object()  # a key called once, not recorded yet
_NEVER = object()  # a key whose code cannot be recorded

_warned: set[tuple[str, type[Exception]]] = set()
"""The (stage, exception type) pairs already reported by a :class:`ReplayWarning`."""


def _report(stage: str, key: Hashable, error: Exception) -> None:
    """A :class:`ReplayWarning` the first time ``stage`` fails with this type of exception in
    the process, a debug log line every time."""
    _log.debug("%s the program of %r failed: %r", stage, key, error)
    if (stage, type(error)) in _warned:
        return
    _warned.add((stage, type(error)))
    warnings.warn(
        f"{stage} the operators of a computation failed ({type(error).__name__}: {error}); it "
        f"runs the Python code from now on, with the same results, more slowly. torch "
        f"{torch.__version__} may have changed an internal API that dynid.model.op_replay uses "
        f"(TorchDynamics(replay=False) turns the replay off)",
        ReplayWarning,
        stacklevel=4,
    )


class ProgramCache:
    """Programs by key: the first call of a key runs the code, the second records it
    (:func:`record`), later ones replay it (:meth:`OpProgram.run`).

    The first call is left to the code because it typically allocates the buffers that the
    program then writes into. A key that cannot be recorded always runs the code. The key must
    determine everything the code does besides the values of its inputs: their shapes, the
    constants it uses and the identity of the buffers it writes into (``keep`` holds an object
    alive with the entry so that an ``id`` in the key stays unique).

    A recording or a replay that raises (any ``Exception``: torch's internals may change under
    this module) is not retried: the call runs the code on the caller's inputs (recording and
    replaying read them, never write them), the key runs the code from then on and a
    :class:`ReplayWarning` is issued. An exception that the code itself raises then reaches the
    caller.
    """

    def __init__(self) -> None:
        self._entries: dict[Hashable, tuple[object, Any]] = {}

    def recorded(self) -> list[Hashable]:
        """The keys whose calls are replayed."""
        return [key for key, (entry, _) in self._entries.items() if isinstance(entry, OpProgram)]

    def run(
        self,
        key: Hashable,
        fn: Callable[..., Any],
        inputs: Sequence[Tensor],
        keep: object = None,
        stage: Sequence[Stage] | None = None,
        plan: bool = False,
    ) -> Any:
        """``fn(*inputs)``, or the replay of its program (outputs owned by the program);
        ``stage`` and ``plan`` as in :func:`record`."""
        entry, _ = self._entries.get(key, (None, None))
        if entry is None:
            self._entries[key] = (_SEEN, keep)
            return fn(*inputs)
        if entry is _SEEN:
            try:
                outputs, program = record(fn, inputs, stage, plan)
            except Exception as error:  # any failure: the code instead
                return self._fall_back(key, keep, "recording", error, fn, inputs)
            self._entries[key] = (_NEVER if program is None else program, keep)
            return outputs
        if isinstance(entry, OpProgram):
            try:
                return entry.run(*inputs)
            except Exception as error:  # any failure: the code instead
                return self._fall_back(key, keep, "replaying", error, fn, inputs)
        return fn(*inputs)

    def _fall_back(
        self,
        key: Hashable,
        keep: object,
        stage: str,
        error: Exception,
        fn: Callable[..., Any],
        inputs: Sequence[Tensor],
    ) -> Any:
        """Discard the program of ``key``, report ``error`` and run ``fn(*inputs)``."""
        self._entries[key] = (_NEVER, keep)
        _report(stage, key, error)
        return fn(*inputs)
