"""Loaders for the UCI classification datasets used by the real-data experiments.

Each loader returns (features float64 [n, d_raw], labels int64 [n] in 0..K-1):

    load_magic     MAGIC Gamma Telescope: 10 real features; g -> 0, h -> 1.       19,020 x 10
    load_mushroom  Mushroom, rows with a missing value dropped; the 22 categorical
                   attributes one-hot encoded (see `onehot_encode`); e -> 0, p -> 1.  5,644 x 98
    load_shuttle   Statlog Shuttle: 9 raw integer features, classes 1..7 of UCI -> 0..6;
                   by default the full data the FN-UCB authors use, UCI's shuttle.trn
                   (43,500 rows) followed by shuttle.tst (14,500 rows):               58,000 x 9

Where the file is looked for, in order:
  1. `path=` (an explicit file; nothing else is tried);
  2. `data_dir=`;
  3. the directory in the environment variable BANDITS_JAX_DATA_DIR;
  4. the cache directory: BANDITS_JAX_CACHE, else ~/.cache/bandits_jax;
  5. a download from the UCI repository into the cache (once; `download=False` disables it).
In a directory the project's file name is tried first, then the UCI names
(magic.dat | magic04.data; mushroom.dat | agaricus-lepiota.data). Shuttle comes in two parts that
must lie in the same directory: shuttle.trn | shuttle.trn.Z, and shuttle.tst; they are read in
that order and stacked. UCI serves the training part compressed (shuttle.trn.Z, Unix `compress`
format, decoded here) and the test part as plain text; the cache keeps both as text.

The 5,000-row Shuttle subsample shuttle_statlog_5000.npz (already column-standardised, so the
FN-UCB preprocessing distorts it; see `load_shuttle`) is read only when passed as `path=`.
"""
from __future__ import annotations

import http.client
import io
import os
import tempfile
import urllib.request
import zipfile
from pathlib import Path
from typing import Callable, NamedTuple, Optional, Tuple

import numpy as np

from ..core import ConfigError

DATA_DIR_ENV = "BANDITS_JAX_DATA_DIR"
CACHE_ENV = "BANDITS_JAX_CACHE"
DOWNLOAD_TIMEOUT_SECONDS = 15.0
UCI_ROOT = "https://archive.ics.uci.edu/ml/machine-learning-databases"

MUSHROOM_ATTRIBUTES = (
    "cap-shape", "cap-surface", "cap-color", "bruises", "odor", "gill-attachment", "gill-spacing",
    "gill-size", "gill-color", "stalk-shape", "stalk-root", "stalk-surface-above-ring",
    "stalk-surface-below-ring", "stalk-color-above-ring", "stalk-color-below-ring", "veil-type",
    "veil-color", "ring-number", "ring-type", "spore-print-color", "population", "habitat",
)


class DataNotFoundError(ConfigError):
    """A dataset file is neither where it was looked for nor downloadable."""


Dataset = Tuple[np.ndarray, np.ndarray]


# ----------------------------------------------------------------------------------- fetching
def _fetch(url: str) -> bytes:
    """Download `url` and return its bytes (short timeout). Tests replace this function."""
    with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_SECONDS) as response:
        return response.read()


def cache_dir() -> Path:
    """The download cache: $BANDITS_JAX_CACHE, else ~/.cache/bandits_jax."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "bandits_jax"


def _write_atomic(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".part", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def unlzw(data: bytes) -> bytes:
    """Decompress a Unix `compress` (.Z, LZW) stream.

    Codes are packed least-significant bit first, from 9 bits up to the header's maximum; in
    block mode code 256 clears the table. After each change of code width (and after a clear),
    the stream skips to the next multiple of `width` bytes counted from where that width began.
    """
    if len(data) < 3 or data[0] != 0x1F or data[1] != 0x9D:
        raise ValueError("not a Unix-compress (.Z) stream")
    max_bits = data[2] & 0x1F
    block_mode = bool(data[2] & 0x80)
    if not 9 <= max_bits <= 16:
        raise ValueError(f"unsupported .Z maximum code width {max_bits}")
    body = data[3:] + b"\0\0\0"
    total_bits = (len(data) - 3) * 8
    table_limit = 1 << max_bits

    def reset():
        return [bytes([i]) for i in range(256)] + ([b""] if block_mode else [])

    table = reset()
    width, pos, start = 9, 0, 0
    bump_at = (1 << width) - 1
    prev = None
    out = bytearray()
    while True:
        if len(table) > bump_at and width < max_bits:
            group = width * 8
            pos = start + -(-(pos - start) // group) * group
            start = pos
            width += 1
            bump_at = (1 << width) - 1
        if pos + width > total_bits:
            break
        byte = pos >> 3
        word = body[byte] | (body[byte + 1] << 8) | (body[byte + 2] << 16)
        code = (word >> (pos & 7)) & ((1 << width) - 1)
        pos += width
        if block_mode and code == 256:
            group = width * 8
            pos = start + -(-(pos - start) // group) * group
            start = pos
            table = reset()
            width, bump_at, prev = 9, (1 << 9) - 1, None
            continue
        if code < len(table):
            entry = table[code]
        elif code == len(table) and prev is not None:
            entry = prev + prev[:1]
        else:
            raise ValueError("corrupt .Z stream (code out of range)")
        out += entry
        if prev is not None and len(table) < table_limit:
            table.append(prev + entry[:1])
        prev = entry
    return bytes(out)


# ----------------------------------------------------------------------------------- parsing
def _text_rows(data: bytes, source: str, sep: Optional[str]):
    """Non-empty, non-header ('@...', '%...') lines of a text file, split into stripped fields."""
    return [fields for _, fields in _numbered_rows(data, source, sep)]


def _numbered_rows(data: bytes, source: str, sep: Optional[str]):
    """(1-based line number, stripped fields) of the lines `_text_rows` keeps."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{source}: not a text file") from None
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line[0] in "@%#":
            continue
        rows.append((number, [f.strip() for f in line.split(sep)]))
    if not rows:
        raise ConfigError(f"{source}: no data rows")
    return rows


def _refuse_infinite(table: np.ndarray, source: str, unit: str, lines=None) -> None:
    """Refuse (ConfigError naming the file, the row and the 1-based column) a table [n, c] read from `source`
    that holds inf or -inf. `unit` says what a row is in the file ("line" or "row"); `lines` [n]: each row's
    line number (None: rows count from 1). NaN passes: it is a missing value, which the FN-UCB preprocessing
    maps to -1 on purpose (`classification.authors_preprocess`)."""
    bad = np.argwhere(np.isinf(table))
    if len(bad):
        row, column = (int(i) for i in bad[0])
        where = lines[row] if lines is not None else row + 1
        raise ConfigError(f"{source}: {unit} {where}, column {column + 1} is {table[row, column]}, not a finite "
                          f"number; fix or remove that {unit} (a missing value may be written nan)")


def _parse_magic(data: bytes, source: str) -> Dataset:
    rows = _numbered_rows(data, source, ",")
    classes = {"g": 0, "h": 1}
    feats, labels = [], []
    for number, row in rows:
        if len(row) != 11 or row[10] not in classes:
            raise ConfigError(f"{source}: line {number} is not 10 numbers then g or h: {','.join(row)[:80]!r}")
        try:
            feats.append([float(v) for v in row[:10]])
        except ValueError:
            raise ConfigError(f"{source}: line {number} has a non-numeric feature") from None
        labels.append(classes[row[10]])
    features = np.asarray(feats, np.float64)
    _refuse_infinite(features, source, "line", [number for number, _ in rows])
    return features, np.asarray(labels, np.int64)


def onehot_encode(raw: np.ndarray, names=None):
    """One-hot encode categorical columns deterministically.

    raw: str [n, c]. Columns are emitted attribute by attribute in the input order; within an
    attribute, one column per value present in `raw`, values sorted (Python string order).
    Returns (float64 [n, total], list of "attribute=value" column names).
    """
    raw = np.asarray(raw, dtype=str)
    names = [f"a{j}" for j in range(raw.shape[1])] if names is None else list(names)
    blocks, columns = [], []
    for j in range(raw.shape[1]):
        values = sorted(set(raw[:, j].tolist()))
        blocks.append((raw[:, j][:, None] == np.asarray(values)[None, :]).astype(np.float64))
        columns += [f"{names[j]}={v}" for v in values]
    return np.concatenate(blocks, axis=1), columns


def _parse_mushroom_raw(data: bytes, source: str, keep_missing: bool = False):
    """(attributes str [n, 22], labels int64 [n]) with rows containing '?' dropped (keep_missing:
    every row kept, '?' then being a value of its own).

    The class (e or p) is the LAST field in the project's mushroom.dat and the FIRST in UCI's
    agaricus-lepiota.data; the column holding only e/p values is taken as the class.
    """
    rows = _text_rows(data, source, ",")
    if any(len(r) != 23 for r in rows):
        bad = next(i for i, r in enumerate(rows) if len(r) != 23)
        raise ConfigError(f"{source}: line {bad + 1} has {len(rows[bad])} fields, expected 23")
    table = np.asarray(rows, dtype=str)
    classes = {"e", "p"}
    if set(table[:, -1].tolist()) <= classes:
        label_col, attrs = table[:, -1], table[:, :-1]
    elif set(table[:, 0].tolist()) <= classes:
        label_col, attrs = table[:, 0], table[:, 1:]
    else:
        raise ConfigError(f"{source}: no class column of e/p values (first or last field)")
    keep = np.ones(len(attrs), bool) if keep_missing else ~np.any(attrs == "?", axis=1)
    return attrs[keep], (label_col[keep] == "p").astype(np.int64)


def _parse_mushroom(data: bytes, source: str, keep_missing: bool = False) -> Dataset:
    attrs, labels = _parse_mushroom_raw(data, source, keep_missing)
    features, _ = onehot_encode(attrs, MUSHROOM_ATTRIBUTES)
    return features, labels


def _parse_shuttle_text(data: bytes, source: str) -> Dataset:
    rows = _numbered_rows(data, source, None)
    try:
        table = np.asarray([fields for _, fields in rows], dtype=np.float64)
    except ValueError:
        raise ConfigError(f"{source}: expected rows of 10 numbers (9 features then the class 1..7)") from None
    if table.ndim != 2 or table.shape[1] != 10:
        raise ConfigError(f"{source}: expected rows of 10 numbers (9 features then the class 1..7)")
    _refuse_infinite(table, source, "line", [number for number, _ in rows])
    labels = table[:, 9].astype(np.int64)
    if labels.min() < 1 or labels.max() > 7:
        raise ConfigError(f"{source}: Shuttle classes must be 1..7, got {labels.min()}..{labels.max()}")
    return table[:, :9], labels - 1


def _parse_shuttle_npz(data: bytes, source: str) -> Dataset:
    try:
        with np.load(io.BytesIO(data)) as z:
            x, y = np.asarray(z["x"], np.float64), np.asarray(z["label"])
    except (ValueError, KeyError, OSError, zipfile.BadZipFile) as err:
        raise ConfigError(f"{source}: expected an .npz with arrays 'x' [n, 9] and 'label' [n] ({err})") from None
    if x.ndim != 2 or x.shape[1] != 9 or y.shape != (x.shape[0],):
        raise ConfigError(f"{source}: expected 'x' [n, 9] and 'label' [n], got {x.shape} and {y.shape}")
    _refuse_infinite(x, source, "row")
    y = y.astype(np.int64)
    if y.min() < 0 or y.max() > 6:
        raise ConfigError(f"{source}: Shuttle labels must be 0..6, got {y.min()}..{y.max()}")
    return x, y


def _parse_shuttle(data: bytes, source: str) -> Dataset:
    if data[:2] == b"PK":
        return _parse_shuttle_npz(data, source)
    if data[:2] == b"\x1f\x9d":
        try:
            data = unlzw(data)
        except ValueError as err:
            raise ConfigError(f"{source}: {err}") from None
    return _parse_shuttle_text(data, source)


# ----------------------------------------------------------------------------------- look-up
class _Part(NamedTuple):
    """One file of a data set: the names tried in a directory (the project's first), its UCI
    download, the name it is cached under and what turns the downloaded bytes into those cached."""

    files: Tuple[str, ...]
    url: str
    cache_name: str
    prepare: Callable[[bytes], bytes]


class _Source(NamedTuple):
    """A data set: its parts, read in order and stacked row-wise, and the parser of one file.
    path_only: further files accepted as `path=` but never looked for in a directory."""

    parts: Tuple[_Part, ...]
    parse: Callable[[bytes, str], Dataset]
    path_only: Tuple[str, ...] = ()


def _identity(data: bytes) -> bytes:
    return data


SHUTTLE_URL = f"{UCI_ROOT}/statlog/shuttle"
SOURCES = {
    "magic": _Source((_Part(("magic.dat", "magic04.data"), f"{UCI_ROOT}/magic/magic04.data", "magic04.data",
                            _identity),), _parse_magic),
    "mushroom": _Source((_Part(("mushroom.dat", "agaricus-lepiota.data"), f"{UCI_ROOT}/mushroom/agaricus-lepiota.data",
                               "agaricus-lepiota.data", _identity),), _parse_mushroom),
    "shuttle": _Source((_Part(("shuttle.trn", "shuttle.trn.Z"), f"{SHUTTLE_URL}/shuttle.trn.Z", "shuttle.trn", unlzw),
                        _Part(("shuttle.tst",), f"{SHUTTLE_URL}/shuttle.tst", "shuttle.tst", _identity)),
                       _parse_shuttle, path_only=("shuttle_statlog_5000.npz",)),
}


def _read(path: Path, parse) -> Dataset:
    try:
        data = path.read_bytes()
    except OSError as err:
        raise DataNotFoundError(f"cannot read {path}: {err.strerror or err}") from None
    return parse(data, str(path))


def _stack(datasets) -> Dataset:
    """The parts' (features, labels) one after another."""
    if len(datasets) == 1:
        return datasets[0]
    return np.concatenate([x for x, _ in datasets]), np.concatenate([y for _, y in datasets])


def _wanted(source: _Source) -> str:
    """The files a directory must hold, e.g. 'shuttle.trn / shuttle.trn.Z and shuttle.tst'."""
    return " and ".join(" / ".join(part.files) for part in source.parts)


def _find(folder: Path, part: _Part) -> Optional[Path]:
    return next((folder / f for f in part.files if (folder / f).is_file()), None)


def _load(name: str, path=None, data_dir=None, download: bool = True, parse=None) -> Dataset:
    """Find, read (or download and cache) data set `name`; `parse(bytes, source)` overrides its parser."""
    source = SOURCES[name]
    if parse is not None:
        source = source._replace(parse=parse)
    if path is not None:
        file = Path(path).expanduser()
        if not file.is_file():
            accepted = [f for part in source.parts for f in part.files] + list(source.path_only)
            raise DataNotFoundError(
                f"{name} data: file {file} does not exist; pass an existing path= "
                f"(expected one of {', '.join(accepted)})")
        return _read(file, source.parse)
    dirs = []
    if data_dir is not None:
        dirs.append(given_folder(data_dir, f"{name} data"))
    if os.environ.get(DATA_DIR_ENV):
        dirs.append(Path(os.environ[DATA_DIR_ENV]).expanduser())
    cache = cache_dir()
    dirs.append(cache)
    for folder in dirs:
        found = [_find(folder, part) for part in source.parts]
        if all(found):
            return _stack([_read(file, source.parse) for file in found])
    searched = ", ".join(str(d) for d in dirs)
    together = " (all in one directory)" if len(source.parts) > 1 else ""
    fix = (f"pass path= or data_dir=, set {DATA_DIR_ENV}, or place the file{'s' if together else ''} in the "
           f"cache dir {cache}")
    if not download:
        raise DataNotFoundError(
            f"{name} data not found: no {_wanted(source)}{together} in {searched} (download disabled); {fix}")
    stored, parsed = {}, []
    for part in source.parts:  # parts already in the cache are read from it, the others downloaded
        cached = _find(cache, part)
        if cached is not None:
            parsed.append(_read(cached, source.parse))
            continue
        try:
            stored[part.cache_name] = part.prepare(_fetch(part.url))
            parsed.append(source.parse(stored[part.cache_name], part.url))
        except (OSError, ValueError, http.client.HTTPException) as err:  # URLError, timeouts: OSError
            reason = str(err).replace("\n", " ")[:160]
            raise DataNotFoundError(
                f"{name} data not found: no {_wanted(source)}{together} in {searched}, and downloading "
                f"{part.url} failed ({reason}); {fix}") from None
    for cache_name, data in stored.items():
        try:
            _write_atomic(cache / cache_name, data)
        except OSError:
            pass  # an unwritable cache only costs a download next time
    return _stack(parsed)


# ----------------------------------------------------------------------------------- public loaders
def given_folder(data_dir, what: str) -> Path:
    """`data_dir` as a Path, refused (DataNotFoundError) where it is not an existing folder: a folder
    the user names is never silently passed over for the next place in the look-up order."""
    folder = Path(data_dir).expanduser()
    if not folder.is_dir():
        raise DataNotFoundError(f"{what}: data_dir {folder} is not an existing folder; give the folder that holds "
                                f"the files, or leave data_dir empty to use ${DATA_DIR_ENV} and the cache")
    return folder


def load_magic(path=None, data_dir=None, *, download: bool = True) -> Dataset:
    """MAGIC Gamma Telescope: (features float64 [19020, 10], labels int64 [19020]; g -> 0, h -> 1).

    path: an explicit file (magic.dat or UCI's magic04.data: 10 numbers then g/h per line).
    data_dir: a directory holding magic.dat or magic04.data. See the module docstring for the
    rest of the look-up and the download.
    """
    return _load("magic", path, data_dir, download)


MISSING = ("drop", "category")


def load_mushroom(path=None, data_dir=None, *, download: bool = True, missing: str = "drop") -> Dataset:
    """Mushroom: (features float64 [5644, 98] one-hot, labels int64 [5644]; e -> 0, p -> 1).

    Accepts mushroom.dat (22 letters then the class) or UCI's agaricus-lepiota.data (the class
    first). missing="drop" (default): rows with a missing value ('?', only in stalk-root) are
    dropped (8,124 -> 5,644 for UCI's file); missing="category": every row is kept and '?' is a
    value of its own ([8124, 117]; the asynchronous kernel bandits' preprocessing). Column order:
    the 22 attributes in UCI order (MUSHROOM_ATTRIBUTES), each expanded into one column per value
    present, values in alphabetical order (`onehot_encode`).
    """
    if missing not in MISSING:
        raise ConfigError(f"mushroom: missing must be one of {MISSING}, got {missing!r}")
    parse = None if missing == "drop" else (lambda data, source: _parse_mushroom(data, source, keep_missing=True))
    return _load("mushroom", path, data_dir, download, parse=parse)


def load_shuttle(path=None, data_dir=None, *, download: bool = True) -> Dataset:
    """Statlog Shuttle: (features float64 [n, 9], labels int64 [n] in 0..6).

    Default (no path=): the full data, n = 58,000: UCI's shuttle.trn (43,500 rows; the file or
    its compressed shuttle.trn.Z) followed by shuttle.tst (14,500 rows), both from one directory
    or downloaded (module docstring). This row order, "the file's order", is what the FN-UCB
    authors' per-agent shuffles permute (`classification`). The features are UCI's raw integers,
    so the authors' preprocessing is applied once, by the bandit.
    path=: one file alone: shuttle.trn, shuttle.trn.Z or shuttle.tst (9 integers then the class
    1..7 per line, mapped to 0..6), or the 5,000-row subsample shuttle_statlog_5000.npz (arrays
    'x' [5000, 9] and 'label' 0..6), kept for small tests. Its columns are already standardised,
    and the authors' preprocessing applied on top of that changes the geometry: row norms after
    preprocessing at percentiles 5/50/95 are 2.00/2.56/3.55, against 1.16/2.00/5.34 on the full
    data.
    """
    return _load("shuttle", path, data_dir, download)


LOADERS = {"magic": load_magic, "mushroom": load_mushroom, "shuttle": load_shuttle}


def load_dataset(name: str, path=None, data_dir=None, *, download: bool = True, **options) -> Dataset:
    """Load dataset `name` ("magic", "mushroom" or "shuttle"); returns (features [n, d_raw], labels [n]).
    options: the loader's own keywords (mushroom: missing)."""
    if name not in LOADERS:
        raise ConfigError(f"unknown dataset {name!r}; known: {', '.join(sorted(LOADERS))}")
    return LOADERS[name](path, data_dir, download=download, **options)
