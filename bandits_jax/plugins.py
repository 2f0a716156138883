"""A user's own algorithms and problems, joined without editing the library.

A plugin is a Python module that registers names when it is imported
(`bandits_jax.algorithms.register_algorithm`, `bandits_jax.problems.register_problem`):

    bandits-jax arena --plugin my_bandits                 a module on the import path
    bandits-jax arena --plugin ./my_bandits.py            a file
    bandits-jax run --problem cosine --algorithm my_ucb --plugin my_bandits

A package can also declare its algorithms as entry points, found without any flag:

    [project.entry-points."bandits_jax.algorithms"]
    my_ucb = "my_bandits:my_ucb"          a factory, registered under the entry point's name

Entry points of the group `bandits_jax.problems` register problem builders the same way. An entry
point that names a module (no ":") is imported for what it registers itself.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from importlib import metadata
from pathlib import Path

from .core import ConfigError

GROUPS = ("bandits_jax.algorithms", "bandits_jax.problems")
SPEC_SEPARATORS = ":,=+"  # they separate a spec's parts (`curves.parse_spec`), so no registered name holds one


def check_registration(kind: str, name, target) -> None:
    """Refuse (ConfigError, one line) to register `target` as the `kind` ("algorithm", "problem") `name`
    where a spec could not name it (not a non-empty string, or holding whitespace or one of
    SPEC_SEPARATORS) or where it is not callable (a factory or builder, called with keyword options)."""
    if not isinstance(name, str) or not name or any(c in SPEC_SEPARATORS or c.isspace() for c in name):
        raise ConfigError(f"cannot register the {kind} {name!r}: a name is a non-empty string without whitespace "
                          f"or any of {' '.join(SPEC_SEPARATORS)} (they separate a spec's parts); choose another")
    if not callable(target):
        raise ConfigError(f"cannot register the {kind} {name!r}: what is given ({type(target).__name__}) is not "
                          f"callable; register the function that builds the {kind} from keyword options")


def load_plugins(modules=()) -> list:
    """Import every module of `modules` (names or .py paths) and load the entry points of `GROUPS`;
    returns what was loaded, as text. ConfigError (one line) when a plugin cannot be imported."""
    loaded = [_import(m) for m in modules]  # a module imported before is not imported again
    for group in GROUPS:
        for point in metadata.entry_points(group=group):
            loaded.append(_load_entry_point(group, point))
    return loaded


def _import(module: str) -> str:
    path = Path(module)
    try:
        if module.endswith(".py") or path.is_file():
            if not path.is_file():
                raise FileNotFoundError(f"no file {module}")
            known = sys.modules.get(path.stem)
            if known is not None and Path(getattr(known, "__file__", "") or "").resolve() == path.resolve():
                return str(path)  # imported already: its names are registered
            spec = importlib.util.spec_from_file_location(path.stem, path)
            loaded = importlib.util.module_from_spec(spec)
            sys.modules[path.stem] = loaded
            spec.loader.exec_module(loaded)
            return str(path)
        if "" not in sys.path and str(Path.cwd()) not in sys.path:
            sys.path.insert(0, str(Path.cwd()))  # a module beside the command, as `python -m` finds it
        importlib.import_module(module)
        return module
    except ConfigError as err:  # a registration it made was refused
        sys.modules.pop(path.stem, None)
        raise ConfigError(f"--plugin {module}: {err}") from err
    except SystemExit as err:  # a script's exit at import would end the command silently
        sys.modules.pop(path.stem, None)
        raise ConfigError(f"--plugin {module}: it called sys.exit({err.code!r}) while being imported; a plugin "
                          f"only registers names (keep script code under `if __name__ == \"__main__\":`)") from err
    except Exception as err:  # noqa: BLE001 - any failure of a user's module is reported in one line
        sys.modules.pop(path.stem, None)
        raise ConfigError(f"--plugin {module}: cannot import it ({type(err).__name__}: {err}); give a module "
                          f"on the import path or a .py file") from err


def _load_entry_point(group: str, point) -> str:
    from .algorithms import register_algorithm
    from .problems import register_problem

    try:
        target = point.load()
    except ConfigError as err:  # a registration its module made was refused
        raise ConfigError(f"entry point {point.name} = {point.value} of {group}: {err}") from err
    except SystemExit as err:  # a script's exit at import would end the command silently
        raise ConfigError(f"entry point {point.name} = {point.value} of {group}: its module called "
                          f"sys.exit({err.code!r}) while being imported; a plugin only registers names") from err
    except Exception as err:  # noqa: BLE001
        raise ConfigError(f"entry point {point.name} = {point.value} of {group} cannot be loaded "
                          f"({type(err).__name__}: {err})") from err
    if callable(target):
        try:
            (register_algorithm if group == GROUPS[0] else register_problem)(point.name, target)
        except ValueError as err:
            raise ConfigError(f"entry point {point.name} of {group}: {err}") from err
    return f"{group}:{point.name}"
