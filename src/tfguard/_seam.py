"""The one place tfguard replaces an attribute of Keras: every patch, in one documented order.

tfguard observes and guards training by replacing a few methods of Keras's
classes and of the user's models, layers and optimizers while it is
attached. Every such replacement goes through `replace` and comes off
through `restore`; `SITES` lists each one, in the order they are installed
when everything is attached (the outermost first), with who installs it and
why. `replace` refuses an attribute that is not in `SITES`, and a test reads
the source so that no other module assigns one: a new patch is a new row
here, with its reason.

Removal is in any order and always exact: the attribute gets back what its
owner held before (or loses it, if the owner had none of its own), a patch
removed from under a later one is spliced out of the chain, and a patch
whose value was replaced since by something else (Keras building a new
train function) is dropped without touching it.

Example:

>>> class Model:
...     def fit(self):
...         return "keras"
>>> m = Model()
>>> replace(m, "fit", lambda: "guarded")
>>> m.fit(), [p.name for p in patches(m)]
('guarded', ['fit'])
>>> restore(m, "fit")
True
>>> m.fit(), "fit" in vars(m), patches(m)
('keras', False, [])
"""

from __future__ import annotations

import dataclasses
import itertools
import weakref


@dataclasses.dataclass(frozen=True)
class Site:
    """Attributes tfguard replaces, on what, by which module, and why."""

    names: tuple[str, ...]
    on: str
    by: str
    why: str

    @property
    def on_classes(self) -> bool:
        """Whether the owners are Keras's classes (else objects: models, layers, optimizers)."""
        return "(the class" in self.on or self.on.endswith("classes")


SITES: tuple[Site, ...] = (
    Site(("compile", "fit"), "keras.Model (the class)", "tfguard.remedies._intercept",
         "`tfguard run --try-fixes`: each trial's models are compiled and fitted with the fix applied"),
    Site(("fit",), "keras.Model (the class)", "tfguard.attach._session",
         "`tfguard run`: every model the script fits is guarded, logged and diagnosed"),
    Site(("apply",), "keras.optimizers.Optimizer and LossScaleOptimizer (the classes)", "tfguard._hooks.context",
         "the optimizer's apply: each update passes the gate of the step (or of a hand-written loop)"),
    Site(("__call__", "update_state", "__init_subclass__"), "keras.losses.Loss and keras.metrics.Metric "
         "classes", "tfguard.attach._loops.patches",
         "a hand-written loop's losses and metrics, seen while `tfguard run` has a session open"),
    Site(("train_step", "make_train_function", "reset_metrics", "fit", "_tfguard_completed_step"),
         "a guarded model", "tfguard._firewall.instrument",
         "the guarded step, its host loop, the epoch's counts and the step a lost worker resumes at"),
    Site(("_maybe_symbolic_build", "_make_function"), "a model fitted under MultiWorkerMirroredStrategy",
         "tfguard._distribute.keras_20585", "Keras 3 cannot fit under MWMS without them (keras-team/keras#20585)"),
    Site(("call",), "each layer of a guarded or logged model", "tfguard._hooks.taps",
         "each layer's output, for the forward check stage and the activation signals"),
    Site(("train_function",), "a guarded or logged model", "tfguard._firewall.instrument, tfguard.summary._lifecycle",
         "the host loop of the guard, and the Logger's wrapper that times and peeks the first batch"),
    Site(("compute_loss",), "a guarded or logged model", "tfguard._hooks.context",
         "(when the step is traced) the loss it computes, with its predictions and labels, for the loss check stage"),
    Site(("assign", "assign_add", "assign_sub", "_apply_weight_decay", "_backend_update_step",
          "_distributed_tf_update_step", "_var_key"),
         "an optimizer, for the span of one dry run", "tfguard._hooks.keras_compat",
         "the backend-neutral update that writes nothing until the step is accepted"),
)
"""Every attribute tfguard replaces, outermost first: the order they are installed when all is attached.

The classes' patches come first; `Optimizer.apply` is wrapped once per
process, at the first guard or session. A model's own patches follow in
this order: the guard's step and host loop, the taps of its layers, the
train functions (the host loop, then the Logger's wrapper), and
`compute_loss` when the step is traced.
"""

SITE_NAMES = frozenset(name for site in SITES for name in site.names)
"""The attribute names `replace` accepts."""

_ABSENT = object()


def site_of(owner, name: str) -> Site:
    """The site of `name` on `owner` (a class or an object).

    Raises:
        ValueError: for an attribute that is not one of `SITES`.
    """
    on_class = isinstance(owner, type)
    for site in SITES:
        if name in site.names and site.on_classes == on_class:
            return site
    what = "class" if on_class else "object"
    raise ValueError(f"tfguard._seam: {name!r} is not a patch site of a {what}; expected one of "
                     f"{sorted(n for s in SITES if s.on_classes == on_class for n in s.names)}. "
                     "Fix: add a Site to tfguard._seam.SITES, with who installs it and why.")


class Patch:
    """One replacement in place: its site, the owner (held weakly), the attribute, the value put in and the one held before."""

    def __init__(self, site: Site, owner, name: str, value, held):
        self.site = site
        self._owner = weakref.ref(owner)
        self.name = name
        self.value = value
        self.held = held  # what the owner's own __dict__ had, or _ABSENT
        self.order = next(_ORDER)  # when it was installed, across all owners

    @property
    def owner(self):
        """The patched object (`None` once it is gone)."""
        return self._owner()

    def __repr__(self) -> str:
        owner = self.owner
        what = owner.__name__ if isinstance(owner, type) else type(owner).__name__
        return f"Patch({what}.{self.name})"


_ORDER = itertools.count()
_CLASS_PATCHES: list[Patch] = []
"""The patches of classes (Keras's, which live as long as the process)."""
_PATCHED: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
"""`id(owner) -> owner` of each object with patches in place. Its patches are kept on the object itself
(`_OWN_PATCHES`, `keep_on`): a patch's values (a model's bound methods) refer to the model."""
_OWN_PATCHES = "_tfguard_patches"


def _set(owner, name: str, value) -> None:
    # classes through type's setattr; instances past Keras's attribute tracking
    (setattr if isinstance(owner, type) else object.__setattr__)(owner, name, value)


def _delete(owner, name: str) -> None:
    (delattr if isinstance(owner, type) else object.__delattr__)(owner, name)


def _own(owner, name: str):
    return vars(owner).get(name, _ABSENT)


def keep_on(owner, name: str, value) -> None:
    """Keeps `value` on `owner` as tfguard's own attribute `name`, past Keras's and TensorFlow's attribute tracking.

    What tfguard attaches to a model (its instrumentation, its patches, its
    invariant watch, a session's state) is kept on the model, so the two die
    together: a registry keyed weakly by the model would keep it alive, as
    what it holds refers to the model.
    """
    object.__setattr__(owner, name, value)


def kept_on(owner, name: str):
    """What `keep_on` put on `owner` as `name`, or `None`."""
    return vars(owner).get(name) if hasattr(owner, "__dict__") else None


def take_off(owner, name: str):
    """Takes off what `keep_on` put on `owner` as `name` and returns it (`None` if nothing)."""
    return vars(owner).pop(name, None) if hasattr(owner, "__dict__") else None


def _patches_of(owner) -> list[Patch]:
    """The list `owner`'s patches are kept in (the classes' one list, or the object's own; empty if it has none)."""
    if isinstance(owner, type):
        return _CLASS_PATCHES
    own = kept_on(owner, _OWN_PATCHES)
    return own if own is not None else []


def _prune() -> None:
    _CLASS_PATCHES[:] = [p for p in _CLASS_PATCHES if p.owner is not None]


def patches(owner=None) -> list[Patch]:
    """The patches in place (of `owner`, or all), in the order they were installed."""
    _prune()
    if owner is not None:
        return [p for p in _patches_of(owner) if p.owner is owner]
    every = [*_CLASS_PATCHES, *(p for o in list(_PATCHED.values()) for p in _patches_of(o))]
    return sorted(every, key=lambda p: p.order)


def replace(owner, name: str, value) -> None:
    """Sets `owner.name` to `value` (on the instance or class itself), remembering what it held.

    Raises:
        ValueError: for an attribute that is not one of `SITES`.
    """
    site = site_of(owner, name)
    _prune()
    patch = Patch(site, owner, name, value, _own(owner, name))
    if isinstance(owner, type):
        _CLASS_PATCHES.append(patch)
    else:
        own = kept_on(owner, _OWN_PATCHES)
        if own is None:
            own = []
            keep_on(owner, _OWN_PATCHES, own)
            _PATCHED[id(owner)] = owner
        own.append(patch)
    _set(owner, name, value)


def restore(owner, name: str, value=_ABSENT) -> bool:
    """Takes off the patch of `owner.name` (the one that put `value` in, else the latest).

    The attribute gets back what it held before the patch, unless a later
    patch is on top of it (then that one will give back what this one held)
    or the attribute no longer holds this patch's value (something else
    replaced it since: it is left as it is). Returns whether a patch was found.
    """
    _prune()
    kept = _patches_of(owner)
    chain = [p for p in kept if p.owner is owner and p.name == name]
    if value is not _ABSENT:
        chain_of_value = [p for p in chain if p.value is value]
        if not chain_of_value:
            return False
        patch = chain_of_value[-1]
    elif chain:
        patch = chain[-1]
    else:
        return False
    above = chain[chain.index(patch) + 1:]
    if above:
        above[0].held = patch.held
    elif _own(owner, name) is patch.value:
        if patch.held is _ABSENT:
            _delete(owner, name)
        else:
            _set(owner, name, patch.held)
    kept.remove(patch)
    if not kept and not isinstance(owner, type):
        take_off(owner, _OWN_PATCHES)
        _PATCHED.pop(id(owner), None)
    return True


def take_aside(owner, name: str, build):
    """Calls `build()`, which sets `owner.name` itself (Keras's `make_train_function`), and returns what it set.

    The attribute is given back what it held before: the function Keras
    built is taken for tfguard's own use without being installed.
    """
    before = _own(owner, name)
    build()
    built = getattr(owner, name)
    if before is _ABSENT:
        _delete(owner, name)
    else:
        _set(owner, name, before)
    return built


__all__ = ["SITES", "SITE_NAMES", "Patch", "Site", "keep_on", "kept_on", "patches", "replace", "restore", "site_of", "take_aside",
           "take_off"]
