"""Tracing: run the user's NumPy/CuPy-style function on :class:`fusec.frontend.tracer.Tracer` values, recording a
Graph (:func:`trace_function`).

While a function traces, the library functions that would not reach a Tracer by themselves (CuPy's, SciPy's
softmax family, the array creators) are wrapped to dispatch to fusec's implementations, found in the registry
(:mod:`fusec.frontend.registry`). This module imports every function module, so that each has registered its
implementations before anything is traced: the one place that does.

Anything else (Python control flow on a traced value, an unsupported function) raises a fusec
error naming the user's file and line.

A fused function called while another traces is inlined (:func:`inline`): its Python function runs on the caller's
traced values, so its ops join the caller's trace, one plan fused across the boundary. ``cupy.get_array_module``
answers for the backend of the arguments being traced (:func:`array_module`): NumPy for NumPy arrays, the CuPy
module asked for CuPy arrays and ArraySpecs; both trace the same ops.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
import threading
import tokenize
import types
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

# the function modules, imported here (and nowhere else for this) for the implementations they register
import fusec.frontend.composite  # noqa: F401
import fusec.frontend.contraction_functions  # noqa: F401
import fusec.frontend.creation_functions  # noqa: F401
import fusec.frontend.elementwise_functions  # noqa: F401
import fusec.frontend.gather_trace  # noqa: F401
import fusec.frontend.join_functions  # noqa: F401
import fusec.frontend.scan_functions  # noqa: F401
import fusec.frontend.shift_functions  # noqa: F401
import fusec.frontend.view_functions  # noqa: F401
from fusec.frontend import aliases, arguments, call_site, indexing, pytrees, registry, scalars, slice_assign
from fusec.frontend.hints import KEYWORD_HINTS
from fusec.frontend.nodes import ShapeGuard, reset_shape_read, shape_guards, shape_was_read
from fusec.frontend.scalars import Scalar
from fusec.frontend.tracer import Tracer, WeakScalar, call_function, numpy_refuses, operand, weak_default
from fusec.ir import dtypes
from fusec.ir.graph import Node, make_node
from fusec.support.errors import (
    FusecAttributeError,
    FusecError,
    FusecTypeError,
    UnsupportedError,
    library_file,
)

# --- tracing a whole function --------------------------------------------------------------------
_trace_lock = threading.RLock()
# this thread's trace in progress: ``module``, the backend its arguments' module queries answer for ("numpy" or
# "cupy"), and ``asked``, whether the traced code asked (then the trace holds for that backend only)
_active = threading.local()


def tracing() -> bool:
    """Whether this thread is tracing a function now (a fused function called from it is inlined)."""
    return getattr(_active, "module", None) is not None


def inline(fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """``fn(*args, **kwargs)`` inside the trace in progress (a fused function called from the traced one): its ops join
    the caller's trace; the library functions its own globals hold are wrapped for the call as the traced function's
    are."""
    patched = _patch_libraries(fn)
    try:
        return fn(*args, **kwargs)
    finally:
        _restore(patched)


def array_module(params: list[tuple[str, Any]]) -> str:
    """The backend a module query (``cupy.get_array_module``) answers for, for a call with arguments ``params``:
    "numpy" for NumPy arrays (the reference backend, also with no array at all), "cupy" for CuPy arrays and
    :class:`fusec.ArraySpec` values (the GPU's plan)."""
    backends = {arguments.backend_of(v) for _, v in params} - {None}
    return "numpy" if not backends or backends == {"numpy"} else "cupy"


def _get_array_module_wrapper(original: Any, module: Any) -> Callable[..., Any]:
    """``module.get_array_module`` (CuPy's) while tracing: for traced arguments, the module of the backend being
    traced for (NumPy, or ``module`` itself for CuPy), so ``xp = cupy.get_array_module(x); xp.exp(x)`` traces."""
    thread = threading.get_ident()

    def get_array_module(*args: Any) -> Any:
        if threading.get_ident() != thread or not any(isinstance(a, Tracer) for a in args):
            return original(*args)
        _active.asked = True
        return np if _active.module == "numpy" else module

    get_array_module.__wrapped__ = original  # type: ignore[attr-defined]
    return get_array_module


# Library functions that never reach a Tracer by themselves, wrapped while tracing to let Tracers through:
# (module, attribute, the name it is registered under). CuPy's functions type-check their argument in Cython or
# build CuPy arrays of their own (``cupy.take_along_axis`` indexes with ``cupy.arange``), so every function fusec
# traces is wrapped in ``cupy`` under its name (:func:`wrapped_functions`: whatever the registry holds, so a new
# traced function reaches CuPy users without a list to update; ufuncs are not wrapped, they dispatch to
# Tracers themselves; the array creators of :func:`created_functions` are wrapped their own way); SciPy's and
# cupyx's softmax family convert it to an array first.
_SOFTMAX_FAMILY = ("logsumexp", "softmax", "log_softmax")
WRAPPED: tuple[tuple[str, str, str], ...] = (
    ("cupy.linalg", "norm", "linalg.norm"),
    *(("scipy.special", name, name) for name in _SOFTMAX_FAMILY),
    *(("cupyx.scipy.special", name, name) for name in _SOFTMAX_FAMILY),
)


def wrapped_functions() -> tuple[tuple[str, str, str], ...]:
    """What tracing wraps: :data:`WRAPPED` and every dotless name of the registry (:data:`fusec.frontend.registry.
    FUNCTIONS`) in ``cupy`` and in ``numpy``: NumPy's own dispatch finds a traced array only where the function's
    dispatcher lists it, not inside a list (``np.mean([a, b], axis=0)``, ``np.max((a, b))``)."""
    created = set(registry.CREATORS)
    names = [name for name in sorted(registry.FUNCTIONS) if "." not in name and name not in created]
    return (*(("cupy", name, name) for name in names), *(("numpy", name, name) for name in names), *WRAPPED)


def _has_tracer(args: tuple, kwargs: dict) -> bool:
    """Whether a Tracer is among the arguments, or in a list or tuple of them (``np.concatenate([a, b])``)."""
    def traced(x: Any) -> bool:
        return isinstance(x, Tracer) or (isinstance(x, (list, tuple)) and any(isinstance(y, Tracer) for y in x))
    return any(traced(x) for x in args) or any(traced(x) for x in kwargs.values())


def created_functions() -> tuple[tuple[str, str, str], ...]:
    """The functions that make an array from numbers alone (``np.arange``, registered with ``creates=True``): a
    call from the traced function's own code (not from a library's) makes fusec's traced array instead of a
    concrete one: (module, attribute, the name it is registered under)."""
    return tuple((module, name, name) for module in ("numpy", "cupy") for name in registry.CREATORS)


def _wrapping(wrapper: Callable[..., Any], original: Any) -> Callable[..., Any]:
    """``wrapper``, marked as tracing's wrapper of ``original`` (``inspect.unwrap`` and :func:`registry.name_of`
    find the function through it)."""
    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(wrapper, registry.ORIGINAL, original)
    return wrapper


def _creator_wrapper(original: Any, qualified: str, impl: str, thread: int) -> Callable[..., Any]:
    name = qualified.rsplit(".", 1)[-1]

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        frame = sys._getframe(1)
        if threading.get_ident() != thread or library_file(frame.f_code.co_filename):
            return original(*args, **kwargs)
        if _called_from_compiled_code(frame, name, (wrapper, original)):
            return original(*args, **kwargs)
        return call_function(impl, qualified, args, kwargs)

    return _wrapping(wrapper, original)


def _called_from_compiled_code(frame: types.FrameType, name: str, creator: tuple[Any, ...]) -> bool:
    """Whether the user's ``frame`` calls the creator ``name`` through compiled code (``np.random.rand(3)``, whose
    Cython calls ``np.empty`` with no Python frame of its own): its call instruction calls another name, which
    holds no ``creator`` (an alias, ``empty = np.empty``, is the user's own call). A random draw is refused
    (:func:`_refuse_random`): drawn once while tracing, it would repeat on every call."""
    called = call_site.called_name(frame)
    if called is None or called == name:
        return False
    value = frame.f_locals.get(called, frame.f_globals.get(called, frame.f_builtins.get(called)))
    if any(value is c for c in creator):
        return False
    if called in _RANDOM_METHODS:
        _refuse_random(called)
    return True


# numpy.random's functions, its Generator's and RandomState's methods, and cupy.random's: refused while tracing
_RANDOM_MODULES = ("numpy.random", "cupy.random")
_RANDOM_METHODS = frozenset(
    name for cls in (np.random.Generator, np.random.RandomState) for name in dir(cls) if not name.startswith("_"))


def _refuse_random(name: str) -> None:
    raise UnsupportedError(
        f"random numbers ({name}) cannot be drawn inside a fused function: they would be drawn once, while "
        "tracing, and the same numbers returned by every call",
        hint="draw them in the kernel with an explicit key, a new one per call: fusec.random.uniform((seed, step), "
             "x.shape) (normal, bernoulli, integers too); or draw them outside and pass them in as an argument")


def _random_wrapper(original: Any, name: str, thread: int) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() != thread or library_file(sys._getframe(1).f_code.co_filename):
            return original(*args, **kwargs)
        _refuse_random(name)

    return _wrapping(wrapper, original)


def _random_functions() -> list[tuple[Any, str, Any]]:
    """(module, attribute, function) of the public callables of the random modules already imported."""
    found = []
    for module_name in _RANDOM_MODULES:
        module = sys.modules.get(module_name)
        for name in getattr(module, "__all__", ()) if module is not None else ():
            value = getattr(module, name, None)
            if callable(value) and not isinstance(value, type):
                found.append((module, name, value))
    return found


def _wrapper(original: Any, qualified: str, impl: str) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _has_tracer(args, kwargs):
            return call_function(impl, qualified, args, kwargs)
        return original(*args, **kwargs)

    return _wrapping(wrapper, original)


_WRAPPERS: dict[tuple, Callable[..., Any]] = {}  # (function, qualified name, implementation, thread) -> its wrapper


def _patch_libraries(fn: Callable[..., Any]) -> list[tuple[Any, str, Any]]:
    """Wrap the :func:`wrapped_functions` of the libraries already imported, in their modules and where the
    traced function's globals (``from scipy.special import softmax``) or closure cells hold them. A function
    reached any other way (a default argument, another module's helper) is SciPy's own, and fails with
    the tracer's error for converting a traced value. Returns what to restore."""
    patched: list[tuple[Any, str, Any]] = []
    originals: dict[int, Any] = {}
    thread = threading.get_ident()
    for (module_name, name, impl), creator in [*((w, False) for w in wrapped_functions()),
                                               *((c, True) for c in created_functions())]:
        module = sys.modules.get(module_name)
        original = getattr(module, name, None) if module is not None else None
        if original is None or not callable(original) or hasattr(original, "nin"):  # absent, or a ufunc
            continue
        key = (original, f"{module_name}.{name}", impl, thread if creator else None)
        wrapper = _WRAPPERS.get(key)
        if wrapper is None:
            if len(_WRAPPERS) > 8192:  # (many short-lived threads tracing: bounded)
                _WRAPPERS.clear()  # made once per function (and thread, for a creator's): tracing a small function is
            # mostly this loop
            wrapper = _WRAPPERS[key] = (_creator_wrapper(original, key[1], impl, thread) if creator
                                        else _wrapper(original, key[1], impl))
        originals[id(original)] = wrapper
        patched.append((module, name, original))
        setattr(module, name, wrapper)
    for module, name, original in _random_functions():
        key = (original, name, "random", thread)
        if key not in _WRAPPERS:
            _WRAPPERS[key] = _random_wrapper(original, name, thread)
        wrapper = originals.setdefault(id(original), _WRAPPERS[key])
        patched.append((module, name, original))
        setattr(module, name, wrapper)
    user_fn = inspect.unwrap(fn)
    user_globals = getattr(user_fn, "__globals__", None)
    # cupy.get_array_module: CuPy's module as imported, and a module named cupy the function's globals hold (the same
    # one, or a stand-in)
    modules = [sys.modules.get("cupy")]
    if isinstance(user_globals, dict):
        modules += [v for v in user_globals.values() if isinstance(v, types.ModuleType) and v.__name__ == "cupy"]
    for module in {id(m): m for m in modules if m is not None}.values():
        original = module.__dict__.get("get_array_module")
        if original is not None and id(original) not in originals:
            wrapper = _get_array_module_wrapper(original, module)
            originals[id(original)] = wrapper
            patched.append((module, "get_array_module", original))
            module.get_array_module = wrapper
    if isinstance(user_globals, dict):
        for key, value in list(user_globals.items()):
            wrapper = originals.get(id(value))
            if wrapper is not None:
                patched.append((user_globals, key, value))
                user_globals[key] = wrapper
    for cell in getattr(user_fn, "__closure__", None) or ():  # a function captured by the traced closure
        try:
            wrapper = originals.get(id(cell.cell_contents))
        except ValueError:  # an empty cell
            continue
        if wrapper is not None:
            patched.append((cell, "cell_contents", cell.cell_contents))
            cell.cell_contents = wrapper
    return patched


def _restore(patched: list[tuple[Any, str, Any]]) -> None:
    for target, name, original in reversed(patched):
        if isinstance(target, dict):
            target[name] = original
        else:
            setattr(target, name, original)


class Traced(NamedTuple):
    """What :func:`trace_function` found: the graph's inputs (arrays, then runtime scalars), the function's
    result as returned, whether it read a concrete size, the runtime scalars that are inputs (in input
    order), the inputs it updated in place: ``(input index, new value)``, and its assignments to part of an
    argument (written after those)."""

    inputs: list[Node]
    result: Any
    shape_read: bool
    scalars: list[Scalar]
    updates: list[tuple[int, Node]]
    parts: list[Any] = []  # assignments to part of an argument, in order (fusec.runtime.write_backs.PartialUpdate)
    gathers: list[Node] = []  # every gather made, read or not (fusec.frontend.indexing.unread_index_checks)
    guards: tuple[ShapeGuard, ...] = ()  # fusec's own decisions taken from sizes (fusec.frontend.nodes.ShapeGuard)
    array_module: str | None = None  # the backend a module query answered for ("numpy", "cupy"), None if none asked
    class_read: frozenset[str] = frozenset()  # runtime scalar arguments whose class a rule read (scalars.read_class)


def trace_function(fn: Callable[..., Any], params: list[tuple[str, Any]], n_positional: int | None = None,
                   runtime: frozenset[str] = frozenset()) -> Traced:
    """Call ``fn`` with a Tracer for every ``(name, ArraySpec-like)`` and the other values as given.

    ``params`` lists each argument by name: array-likes (anything with ``shape`` and ``dtype`` that
    is not a scalar) become ``input`` nodes; the scalars named in ``runtime`` become
    :class:`fusec.frontend.scalars.Scalar` values (graph inputs after the arrays, where they meet an array);
    everything else is passed through unchanged. The first ``n_positional`` (all by default) are passed
    by position, the others by keyword under their names (keyword-only parameters, ``**kwargs``). Returns
    a :class:`Traced` (a graph only valid for these shapes when it read a size). A use of a runtime
    scalar that needs its value raises :class:`fusec.frontend.scalars.NeedsConcrete`. A raw TypeError or
    AttributeError raised while tracing (NumPy's dispatcher refusing ``np.sum(x, dim=1)``, the user's own)
    becomes a FusecError at the user's line that raised it.
    """
    inputs: list[Node] = []
    tracers: list[Tracer] = []
    values: list[Any] = []
    taken = {name for name, _ in params}
    for name, value in params:
        if name in runtime:
            values.append(Scalar.argument(name, value))
        elif _is_array_like(value):
            label = getattr(name, "ident", name)  # a container's leaf: an identifier for its input
            while label != name and label in taken:
                label += "_"
            taken.add(label)
            node = make_node("input", (), {"name": label, "index": len(inputs)},
                             dtype=dtypes.as_dtype(value.dtype), shape=tuple(value.shape))
            inputs.append(node)
            tracers.append(Tracer(node))
            values.append(tracers[-1])
        else:
            values.append(value)
    names, call_args = _arguments_of(params, values)
    n = len(names) if n_positional is None else n_positional
    keywords = dict(zip(names[n:], call_args[n:]))
    with _trace_lock:
        outer = (getattr(_active, "module", None), getattr(_active, "asked", False))
        _active.module, _active.asked = array_module(params), False
        patched = _patch_libraries(fn)
        reset_shape_read()
        scalars.begin(len(inputs), _scalar_input, {name for name, _ in params})
        aliases.begin()
        indexing.begin()
        slice_assign.begin(tracers)
        try:
            result = fn(*call_args[:n], **keywords)
            for value in result if isinstance(result, (tuple, list)) else (result,):
                if isinstance(value, Scalar):  # a scalar returned as it is: an input of its own
                    value.node()
        except (TypeError, AttributeError) as exc:
            if isinstance(exc, FusecError):
                raise
            raise _located(exc) from exc
        finally:
            class_read = scalars.classes_read()
            runtime_inputs = scalars.end()
            aliases.end()
            gathers = indexing.end()
            parts, before, new_values = slice_assign.end()
            _restore(patched)
            asked = _active.module if _active.asked else None
            _active.module, _active.asked = outer
        updates, parts = slice_assign.final_updates(tracers, inputs, parts, before, new_values)
        return Traced(inputs + [s.node() for s in runtime_inputs], result, shape_was_read(), runtime_inputs, updates,
                      parts, gathers, shape_guards(), asked, class_read)


def _arguments_of(params: list[tuple[str, Any]], values: list[Any]) -> tuple[list[str], list[Any]]:
    """The traced call's argument names and values from one value per parameter: the leaves of a container argument
    (:class:`fusec.frontend.pytrees.LeafName`) built again into it."""
    names: list[str] = []
    grouped: dict[str, list[tuple[Any, Any]]] = {}
    for (name, _), value in zip(params, values):
        root = getattr(name, "root", None)
        if root is None:
            names.append(name)
            grouped[name] = [(None, value)]
        else:
            if root not in grouped:
                names.append(root)
                grouped[root] = []
            grouped[root].append((name, value))
    return names, [group[0][1] if group[0][0] is None else pytrees.rebuild(group) for group in
                   (grouped[name] for name in names)]


def _scalar_input(name: str, index: int, dt: np.dtype) -> Node:
    return make_node("input", (), {"name": name, "index": index}, dtype=dt, shape=())


def _located(exc: TypeError | AttributeError) -> FusecError:
    """``exc`` as a FusecError of the same kind, at the innermost line of the user's that raised it."""
    loc = None
    tb = exc.__traceback__
    while tb is not None:
        if not library_file(tb.tb_frame.f_code.co_filename):
            loc = f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"
        tb = tb.tb_next
    text = str(exc)
    hint = next((h for key, h in KEYWORD_HINTS.items() if f"keyword argument '{key}'" in text), None)
    if isinstance(exc, AttributeError):
        return FusecAttributeError(text, loc=loc, hint=hint)
    return FusecTypeError(text, loc=loc, hint=hint)


def _is_array_like(value: Any) -> bool:
    if isinstance(value, (np.generic, int, float, bool, complex)) or value is None:
        return False
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return True
    return hasattr(value, "shape") and hasattr(value, "dtype")


def return_site(fn: Callable[..., Any], *, returning_dict: bool = False) -> str | None:
    """``file:line`` of the ``return`` statement of ``fn`` that gave its result: the one returning a dict
    display or ``dict(...)`` with ``returning_dict``, else the only one; the ``def`` (or ``lambda``) line
    when that is not decided by the source, None without a code object."""
    fn = inspect.unwrap(fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    fallback = f"{code.co_filename}:{code.co_firstlineno}"
    try:
        lines, first = inspect.getsourcelines(fn)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError, tokenize.TokenError):  # the file under its name is not its source
        return fallback
    defs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not defs:
        return fallback  # a lambda: its line is its return
    returns = [n for n in _own_nodes(defs[0]) if isinstance(n, ast.Return)]
    if returning_dict:
        dicts = [r for r in returns if isinstance(r.value, (ast.Dict, ast.DictComp)) or (
            isinstance(r.value, ast.Call) and isinstance(r.value.func, ast.Name) and r.value.func.id == "dict")]
        returns = dicts or returns
    if len(returns) != 1:
        return fallback
    return f"{code.co_filename}:{first + returns[0].lineno - 1}"


def _own_nodes(function: ast.AST) -> list[ast.AST]:
    """The nodes of ``function``'s body, not those of functions or lambdas defined inside it."""
    out: list[ast.AST] = []
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        out.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    return out


def output_node(value: Any, index: int, loc: str | None = None) -> Node:
    """The node of one returned value (a Tracer, or a constant that becomes a 0-d const; the frontend returns
    None entries as None without a node); errors name ``loc`` (the ``return`` line) when given."""
    if isinstance(value, Tracer):
        return value.node
    if isinstance(value, dict):
        raise UnsupportedError(f"output {index} of the fused function is a dict", loc=loc,
                               hint="return a tuple (or a list) of arrays; name them at the call site")
    if numpy_refuses(value):  # a string, an object: NumPy's run returns it, fusec returns arrays (its own refusal)
        raise UnsupportedError(f"output {index} of the fused function is a {type(value).__name__}, not an array",
                               loc=loc, hint="return the arrays it computes (a tuple for several)")
    try:
        x = operand(value, f"output {index}")
    except FusecError as exc:
        raise type(exc)(exc.message, loc=loc or exc.loc, hint=exc.hint) from None
    if isinstance(x, WeakScalar):
        return weak_default(x)
    return x


__all__ = ["WRAPPED", "Traced", "array_module", "created_functions", "inline", "output_node", "return_site",
           "trace_function", "tracing", "wrapped_functions"]
