"""One function of a student's file put in place of the project's own, and taken out again.

A student's file is loaded as a module of its own (it runs its own module-level code); the function is taken from it
by qualified name, rebound to the project module's globals (so `OptOps.UPCAST` is the project's enum; names the
student added to the file or the class come along), given the project's decorator back (`functools.cache` on
`View.reshape`) and put where the project has it, everywhere a project module holds it by name (demo.py imports
`vector_axis`). Every cache of the project's modules is cleared on the way in and out: a cached answer of the other
function would be graded otherwise. A student's file is untrusted: `project_state` and `restore` see and undo what it
changed in the project's modules.
"""

from __future__ import annotations

import builtins
import functools
import importlib.util
import inspect
import itertools
import os
import sys
import traceback
import types
from dataclasses import dataclass
from typing import Any

from exercises import ROOT

_loaded = itertools.count()


class SourceError(Exception):
    """A source that can't give its function (it doesn't compile, raises while loading, lacks the name): the message
    is the verdict's, e.g. `SyntaxError at kernel.py:123: invalid syntax`."""


@dataclass(frozen=True)
class Source:
    """Where a function comes from: a file (a student's kernel.py, a file of wrong answers) and its qualified name
    there. JSON-able: a child process gets it on its command line."""

    path: str
    name: str

    def load(self) -> tuple[types.FunctionType, types.ModuleType]:
        """The function, as the file defines it without its decorators, and the module the file became."""
        module = owner = load_module(self.path)
        *classes, name = self.name.split(".")
        for part in classes:
            owner = inspect.getattr_static(owner, part, None)
            if not isinstance(owner, type):
                raise SourceError(f"{os.path.basename(self.path)} has no class {part} (for {self.name})")
        if (func := unwrapped(inspect.getattr_static(owner, name, None))) is None:
            raise SourceError(f"{os.path.basename(self.path)} has no function {self.name}")
        return func, module


def where(e: BaseException, path: str) -> str:
    """`kernel.py:123`: the last line of e's traceback in the file at path (a student's), else its last line."""
    frames = traceback.extract_tb(e.__traceback__)
    mine = [f for f in frames if os.path.realpath(f.filename) == os.path.realpath(path)] or frames
    return f"{os.path.basename(mine[-1].filename)}:{mine[-1].lineno}" if mine else os.path.basename(path)


def load_module(path: str) -> types.ModuleType:
    """The file at path run as a module of its own (registered in sys.modules while it runs: a dataclass under
    `from __future__ import annotations` looks its module up). SourceError where it doesn't load."""
    base = os.path.basename(path)
    if not os.path.isfile(path):
        raise SourceError(f"no file {path}")
    name = f"_exercise_source_{next(_loaded)}_{os.path.splitext(base)[0]}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        raise SourceError(f"{type(e).__name__} at {base}:{e.lineno}: {e.msg}") from None
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 (a student's file may raise anything, SystemExit too)
        raise SourceError(f"loading {base} raised {type(e).__name__}: {e} ({where(e, path)})") from None
    finally:
        sys.modules.pop(name, None)
    return module


def unwrapped(x: Any) -> Any:
    """The plain function under staticmethod, property, functools.cache and the like (None if there is none)."""
    while True:
        if isinstance(x, (staticmethod, classmethod)):
            x = x.__func__
        elif isinstance(x, property):
            x = x.fget
        elif hasattr(x, "__wrapped__"):
            x = x.__wrapped__
        else:
            return x if isinstance(x, types.FunctionType) else None


def rewrapped(reference: Any, func: types.FunctionType) -> Any:
    """func with the decorators the reference has (from the outside in: staticmethod, property, functools.cache)."""
    if isinstance(reference, (staticmethod, classmethod, property)):
        inner = rewrapped(reference.fget if isinstance(reference, property) else reference.__func__, func)
        return type(reference)(inner)
    if hasattr(reference, "cache_clear"):
        return functools.lru_cache(maxsize=reference.cache_parameters()["maxsize"])(func)
    return func


def rebound(func: types.FunctionType, module: types.ModuleType, cls: type | None, like: Any) -> types.FunctionType:
    """func run in the project module's globals (a method's `super()` and `__class__` mean the project's class)."""
    cells = func.__closure__
    if cells and "__class__" in func.__code__.co_freevars and cls is not None:
        cells = tuple(
            types.CellType(cls) if name == "__class__" else cell for name, cell in zip(func.__code__.co_freevars, cells)
        )
    new = types.FunctionType(func.__code__, vars(module), func.__name__, func.__defaults__, cells)
    new.__kwdefaults__, new.__dict__ = func.__kwdefaults__, dict(func.__dict__)
    new.__module__, new.__doc__ = module.__name__, func.__doc__
    new.__qualname__ = getattr(unwrapped(like), "__qualname__", func.__qualname__)
    return new


def project_modules() -> list[types.ModuleType]:
    """The project's own modules that are loaded (kernel, render, demo, ...: the .py files of its top folder)."""
    top = os.path.realpath(ROOT)
    return [
        m
        for name, m in list(sys.modules.items())
        if "." not in name
        and isinstance(getattr(m, "__file__", None), str)
        and os.path.dirname(os.path.realpath(m.__file__)) == top
    ]


def _namespaces() -> list[tuple[str, Any]]:
    """Each project module and each class it defines, by name: the places a splice changes and a student must not."""
    out = []
    for m in project_modules():
        out.append((m.__name__, m))
        out += [
            (f"{m.__name__}.{k}", v) for k, v in vars(m).items() if isinstance(v, type) and v.__module__ == m.__name__
        ]
    return out


def clear_caches() -> None:
    """Every functools cache of the project's modules and their classes, emptied."""
    for _, space in _namespaces():
        for value in list(vars(space).values()):
            for x in (value, getattr(value, "__func__", None), getattr(value, "fget", None)):
                if hasattr(x, "cache_clear"):
                    x.cache_clear()


def project_state() -> dict:
    """What the project's modules hold: each name's value in each module and class, and the items of each module's
    dicts, lists and sets (TARGETS); `changes` compares by identity."""
    state: dict = {}
    for name, space in _namespaces():
        names = {k: v for k, v in vars(space).items() if not k.startswith("__")}
        state[name] = (space, names)
        if isinstance(space, types.ModuleType):
            for k, v in names.items():
                if type(v) in (dict, list, set):
                    state[f"{name}.{k}[...]"] = (v, type(v)(v) if type(v) is not dict else dict(v))
    return state


def changes(before: dict) -> list[str]:
    """The names of `before` (project_state) whose value is not what it was."""
    out = []
    for name, (space, held) in before.items():
        if name.endswith("[...]"):
            now = space
            same = (
                list(now.items()) == list(held.items()) and all(now[k] is v for k, v in held.items())
                if isinstance(now, dict)
                else sorted(map(id, now)) == sorted(map(id, held))
            )
            out += [] if same else [name[:-5]]
            continue
        now = {k: v for k, v in vars(space).items() if not k.startswith("__")}
        out += [f"{name}.{k}" for k in sorted(set(now) | set(held)) if now.get(k, _MISSING) is not held.get(k)]
    return out


_MISSING = object()


def restore(before: dict) -> None:
    """Put back what `before` (project_state) holds."""
    for name, (space, held) in before.items():
        if name.endswith("[...]"):
            space.clear()
            space.update(held) if not isinstance(space, list) else space.extend(held)
            continue
        for k in {k for k in vars(space) if not k.startswith("__")} - set(held):
            delattr(space, k) if isinstance(space, type) else vars(space).pop(k)
        for k, v in held.items():
            if vars(space).get(k, _MISSING) is not v:
                setattr(space, k, v)


class Splice:
    """`func` (a function of a student's file, undecorated) in place of the project's `file:qualname`, with
    `module` (the file it was loaded from) giving the names it added: `with Splice(...):` or apply() and undo()."""

    def __init__(self, file: str, qualname: str, func: types.FunctionType, extras: types.ModuleType | None = None):
        self.module = importlib.import_module(os.path.splitext(file)[0])  # the project's (sys.path puts it first)
        *path, self.attr = qualname.split(".")
        self.owner = functools.reduce(getattr, path, self.module)
        self.cls = self.owner if isinstance(self.owner, type) else None
        self.reference = inspect.getattr_static(self.owner, self.attr)
        self.original = unwrapped(self.reference)  # the project's own function (kernel.py's answer)
        self.new = rewrapped(self.reference, rebound(func, self.module, self.cls, self.reference))
        self.func, self.extras, self.undo_list = func, extras, []

    def _set(self, space: Any, name: str, value: Any) -> None:
        had = vars(space).get(name, _MISSING)
        self.undo_list.append((space, name, had))
        setattr(space, name, value)

    def apply(self) -> Splice:
        clear_caches()
        self._set(self.owner, self.attr, self.new)
        if self.cls is None:  # a module's function: also where another module imported it by name
            for m in project_modules():
                if m is not self.module and vars(m).get(self.attr) is self.reference:
                    self._set(m, self.attr, self.new)
        for space, student in self._added():
            for name, value in student.items():
                fn = unwrapped(value)
                if fn is not None and getattr(fn, "__module__", None) == getattr(self.extras, "__name__", None):
                    value = rewrapped(value, rebound(fn, self.module, self.cls if space is self.cls else None, value))
                self._set(space, name, value)
        return self

    def _added(self) -> list[tuple[Any, dict]]:
        """The names the student's file has that the project's module (and the target's class) hasn't: its helpers."""
        if self.extras is None:
            return []
        skip = set(vars(builtins))
        out = [
            (self.module, {k: v for k, v in vars(self.extras).items() if k not in vars(self.module) and k not in skip})
        ]
        student_cls = getattr(self.extras, self.cls.__name__, None) if self.cls is not None else None
        if isinstance(student_cls, type):
            out.append((self.cls, {k: v for k, v in vars(student_cls).items() if k not in vars(self.cls)}))
        return [(space, {k: v for k, v in names.items() if not k.startswith("__")}) for space, names in out]

    def undo(self) -> None:
        for space, name, had in reversed(self.undo_list):
            if had is _MISSING:
                delattr(space, name) if isinstance(space, type) else vars(space).pop(name, None)
            else:
                setattr(space, name, had)
        self.undo_list.clear()
        clear_caches()

    def __enter__(self) -> Splice:
        return self.apply()

    def __exit__(self, *exc) -> None:
        self.undo()
