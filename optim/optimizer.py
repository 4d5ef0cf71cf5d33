"""Optimizer: the shared loop that turns each parameter's gradient into an update op."""
from __future__ import annotations

import numpy as np

import tape
from tape import dtypes
from tape import flags as _flags
from tape.errors import InvalidArgumentError
from tape.variable import Variable, unique_name

from .clip import ClipGradBase
from .update_plans import UNPREPARED, prepare

# prepared updates kept per optimizer (one per parameter; beyond this many, they start over)
_PREPARED_LIMIT = 4096
# attributes a step or a learning-rate change sets, which leave the prepared updates valid
_STEP_STATE = frozenset(("_prepared", "learning_rate", "_learning_rate"))


def preparable(update_op):
    """Marks an ``update_op`` that returns, for a parameter, the same op on the same Variables
    at every step until a setting changes (an attribute is set, or state is loaded): its ops
    may be prepared. An ``update_op`` a subclass writes without it runs at every step."""
    update_op.preparable = True
    return update_op


class Optimizer:
    """Base class. A subclass says, in ``update_op``, which op updates one parameter.

    ``optimizer(params)`` runs that op (outside any recording, in place: ParamOut is the
    parameter) for each parameter whose ``.grad`` is set, then clears ``.grad``; parameters
    without a gradient are skipped. Gradients accumulate over ``backward`` calls until the step
    that consumes them, as in DyNet. ``learning_rate`` may be changed between steps.

    ``grad_clip`` (a ClipGradByGlobalNorm, ClipGradByNorm or ClipGradByValue; no state) clips
    the gradients of each step, all at once, before the update ops, here and in ``minimize``.

    Eagerly, a parameter's update op is prepared on its first step (``update_plans.py``) and
    later steps call its kernel directly, with the same bits, where ``update_op`` is marked
    ``@preparable`` (the library's are); setting an attribute of the optimizer (other than
    ``learning_rate``, which is written into its Variables) or loading its state prepares them
    again.
    """

    # Per-parameter state a subclass keeps: slot -> shape, None for the parameter's shape.
    state_slots: dict = {}

    def __init__(self, learning_rate: float, grad_clip: ClipGradBase | None = None):
        if grad_clip is not None and not isinstance(grad_clip, ClipGradBase):
            raise InvalidArgumentError(
                f"{type(self).__name__}: grad_clip must be None or a ClipGradByGlobalNorm, "
                f"ClipGradByNorm or ClipGradByValue, received {type(grad_clip).__name__}")
        self._program_rates = []    # (scope, name) of the learning rates of minimized programs
        self._rates = {}            # (place, param dtype code) -> LearningRate Variable (1,)
        self.learning_rate = learning_rate
        self.grad_clip = grad_clip
        self._accumulators = {}     # parameter name -> {slot: Variable}
        self._prepared = {}         # id(parameter) -> PreparedUpdate or UNPREPARED

    def __setattr__(self, name: str, value) -> None:
        """Set an attribute; a setting that an ``update_op`` may read (``weight_decay``, ...)
        makes the prepared updates again. The learning rate is written into its Variables."""
        object.__setattr__(self, name, value)
        if name not in _STEP_STATE:
            object.__setattr__(self, "_prepared", {})

    @property
    def learning_rate(self) -> float:
        return self._learning_rate

    @learning_rate.setter
    def learning_rate(self, value: float) -> None:
        """Sets the rate of the next steps, eager and in every program ``minimize`` built."""
        self._learning_rate = float(value)
        for rate in self._rates.values():   # in place: the prepared updates read them
            rate.value()[...] = self._learning_rate
        for scope, name in self._program_rates:
            var = scope.find_var(name)
            if var is not None and var.value is not None:
                var.value[...] = self._learning_rate

    def learning_rate_var(self, param: Variable) -> Variable:
        """The (1,) LearningRate Variable for parameters of ``param``'s dtype and place."""
        dtype, place = param.desc.dtype, param.place
        rate = self._rates.get((place, dtype))
        if rate is None:
            rate = _persistable(np.full((1,), self._learning_rate, dtypes.to_numpy(dtype)),
                                "learning_rate", place)
            self._rates[(place, dtype)] = rate
        return rate

    def accumulator(self, param: Variable, slot: str, fill: float) -> Variable:
        """The state ``slot`` of ``param`` (velocity, moment1, ...): a persistable Variable of
        the parameter's dtype, made on first use and filled with ``fill``."""
        slots = self._accumulators.setdefault(param.name, {})
        state = slots.get(slot)
        if state is None:
            shape = self.state_slots[slot] or param.shape
            state = slots[slot] = _persistable(np.full(shape, fill, param.dtype),
                                               f"{param.name}_{slot}", param.place)
        return state

    def state_dict(self, params) -> dict:
        """``{"learning_rate": float, "<key>.<slot>": array}``: the learning rate and a copy of
        each parameter's state. ``params`` names the parameters: a Layer (its ``state_dict``
        keys, stable across processes and models), a ``{key: Variable}`` dict, or a list of
        Variables (their names)."""
        state = {"learning_rate": self._learning_rate}
        for key, p in _keyed(params).items():
            for slot, value in self._accumulators.get(p.name, {}).items():
                state[f"{key}.{slot}"] = value.value().copy()
        return state

    def load_state_dict(self, state: dict, params) -> None:
        """Restore what ``state_dict(params)`` returned (``params`` may be another model with
        the same structure). Checks every key, shape and dtype before changing anything."""
        where = f"{type(self).__name__}.load_state_dict"
        keyed, loaded = _keyed(params), {}
        if "learning_rate" not in state:
            raise InvalidArgumentError(f"{where}: missing key 'learning_rate'")
        for name, value in state.items():
            if name == "learning_rate":
                continue
            key, _, slot = name.rpartition(".")
            if key not in keyed or slot not in self.state_slots:
                raise InvalidArgumentError(
                    f"{where}: unexpected key {name!r}; expected 'learning_rate' or "
                    f"'<parameter key>.<slot>' with a slot in {list(self.state_slots)} and a "
                    f"key in {list(keyed)}")
            p = keyed[key]
            value = p.place.put(value)
            shape = tuple(self.state_slots[slot] or p.shape)
            if value.shape != shape or value.dtype != p.dtype:
                raise InvalidArgumentError(f"{where}: {name!r} expected {p.dtype} {shape}, "
                                           f"received {value.dtype} {value.shape}")
            loaded.setdefault(p.name, {})[slot] = value
        for key, p in keyed.items():    # a parameter's state is all there, or not at all
            missing = set(self.state_slots) - set(loaded.get(p.name, self.state_slots))
            if missing:
                raise InvalidArgumentError(f"{where}: missing key(s) "
                                           f"{sorted(f'{key}.{s}' for s in missing)}")
        self.learning_rate = float(state["learning_rate"])
        self._prepared = {}     # (they may read state Variables made below)
        keyed_by_name = {p.name: p for p in keyed.values()}
        for name, slots in loaded.items():
            current = self._accumulators.setdefault(name, {})
            for slot, value in slots.items():
                if slot in current:     # in place: the update ops keep pointing at it
                    current[slot].value()[...] = value
                else:
                    current[slot] = _persistable(value.copy(), f"{name}_{slot}",
                                                 keyed_by_name[name].place)

    def update_op(self, param: Variable, grad: Variable):
        """``(op type, inputs, outputs, attrs)`` of the op that updates ``param`` from ``grad``;
        inputs and outputs map slots to lists of Variables (``param`` among the outputs)."""
        raise NotImplementedError

    def __call__(self, params) -> None:
        global_tape = tape.get_global_tape()
        params_grads = [(p, p.grad) for p in params if p.grad is not None]
        # Eagerly, with no check on and nothing traced, each parameter's update op is prepared
        # on its first step and later steps call its kernel (update_plans.py); a first step, or
        # one that a parameter's new signature or a pending value sends there, takes the
        # runner, as every update does otherwise. Updates run in the order of ``params``.
        prepared = None if global_tape.lazy or global_tape.tracing or _flags.checking or \
            not getattr(type(self).update_op, "preparable", False) else self._prepared
        done = 0
        if prepared is not None and self.grad_clip is None:
            for p, g in params_grads:     # no op is run: no recording to turn off
                update = prepared.get(id(p))
                if update is None or not update.run(p, g):
                    break
                p.grad = None
                done += 1
        if done < len(params_grads):
            self._update_rest(params_grads, done, global_tape.add_op, prepared)
        if global_tape.lazy:    # the updates were only recorded: a step takes effect when made
            tape.compute(*(p for p, _ in params_grads))

    def _update_rest(self, params_grads: list, done: int, run, prepared) -> None:
        """The updates of ``params_grads[done:]`` (all of them, clipped first, when there is a
        ``grad_clip``), with recording off: update ops, and the clip's ops and those an
        ``update_op`` may run, record nothing."""
        with tape.no_grad():
            if self.grad_clip is not None:
                params_grads = self.grad_clip(params_grads)
            for p, g in params_grads[done:]:
                if prepared is None:
                    run(*self.update_op(p, g))
                elif not self._run_prepared(p, g):
                    self._update_and_prepare(p, g, run)
                p.grad = None

    def _run_prepared(self, param: Variable, grad: Variable) -> bool:
        """Update ``param`` by its prepared update op if it has one that fits ``grad``; False
        (nothing done) otherwise."""
        update = self._prepared.get(id(param))
        return update is not None and update.run(param, grad)

    def _update_and_prepare(self, param: Variable, grad: Variable, run) -> None:
        """Run ``param``'s update op through the runner, and prepare it for the next steps
        unless it is known not to prepare (UNPREPARED)."""
        op = self.update_op(param, grad)
        run(*op)
        if self._prepared.get(id(param)) is not UNPREPARED:
            if len(self._prepared) >= _PREPARED_LIMIT:
                self._prepared.clear()
            self._prepared[id(param)] = prepare(*op, param, grad)

    def minimize(self, loss, program) -> list:
        """Static training: append the backward of ``loss`` to ``program`` (unless already
        there), the ops of ``grad_clip`` if any, and one ``update_op`` per trainable parameter;
        the learning rate and accumulators become persistable variables, with their values in
        ``program.scope``, where later changes of ``learning_rate`` (by hand or by a
        scheduler) reach them too. Returns the clip and update OpDescs, to run as targets.

        >>> program = tape.static.trace(lambda x, y: loss_fn(model(x), y), x, y)
        >>> updates = SGD(0.1).minimize(program.fetch_names[0], program)
        >>> tape.static.Executor().run(program, feed, [program.fetch_names[0]], targets=updates)
        """
        from tape.static import Program, append_backward, append_optimizer_ops
        ops = append_optimizer_ops(program, append_backward(program, loss), self.update_op,
                                   self.grad_clip)
        if isinstance(program, Program):
            rates = dict.fromkeys(op.input("LearningRate")[0] for op in ops
                                  if op.input("LearningRate"))
            self._program_rates.extend((program.scope, name) for name in rates)
        return ops


def _persistable(value, prefix: str, place) -> Variable:
    v = Variable(value, name=unique_name(prefix), place=place)
    v.desc.persistable = True
    return v


def _keyed(params) -> dict:
    """``{key: parameter}`` from a Layer (its trainable state_dict entries), a dict, or a list."""
    if hasattr(params, "state_dict"):
        return {k: v for k, v in params.state_dict(keep_vars=True).items() if not v.stop_gradient}
    if isinstance(params, dict):
        return params
    return {p.name: p for p in params}
