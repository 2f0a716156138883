"""Dataset loaders: the real files (when available), the look-up order, errors and mocked downloads."""
import shutil
import subprocess
import urllib.error

import numpy as np
import pytest

from bandits_jax.core import ConfigError
from bandits_jax.problems import datasets
from bandits_jax.problems.datasets import (
    DataNotFoundError, load_dataset, load_magic, load_mushroom, load_shuttle, onehot_encode, unlzw,
)
from bandits_jax.problems.classification import authors_preprocess
from helpers import REAL_DIR, needs_data

REAL_FETCH = datasets._fetch


class FakeNet:
    """Stands in for `datasets._fetch`: serves fixed bytes per URL and counts calls."""

    def __init__(self, responses=None, error=None):
        self.responses, self.error, self.calls = responses or {}, error, []

    def __call__(self, url):
        self.calls.append(url)
        if self.error is not None:
            raise self.error
        return self.responses[url]


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    """No network, an empty private cache, no data-dir variable."""
    monkeypatch.setattr(datasets, "_fetch", FakeNet(error=urllib.error.URLError("no network in tests")))
    monkeypatch.setenv(datasets.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(datasets.DATA_DIR_ENV, raising=False)
    return tmp_path


def compress_z(data: bytes, max_bits: int = 16, block_mode: bool = True, clear_when_full: bool = False) -> bytes:
    """A Unix-compress (.Z) encoder for building download fixtures (LZW, LSB-first codes,
    width groups padded to width bytes, optional CLEAR when the table is full)."""
    out = bytearray([0x1F, 0x9D, max_bits | (0x80 if block_mode else 0)])
    state = {"acc": 0, "nacc": 0, "written": 0, "width": 9}

    def put(code, nbits):
        state["acc"] |= code << state["nacc"]
        state["nacc"] += nbits
        state["written"] += nbits
        while state["nacc"] >= 8:
            out.append(state["acc"] & 0xFF)
            state["acc"] >>= 8
            state["nacc"] -= 8

    def pad():
        put(0, (-state["written"]) % (state["width"] * 8))
        state["written"] = 0

    first = 257 if block_mode else 256
    table, free, limit = {bytes([i]): i for i in range(256)}, first, 1 << max_bits

    def emit(code):
        put(code, state["width"])
        if free > (1 << state["width"]) - 1 and state["width"] < max_bits:
            pad()
            state["width"] += 1

    w = b""
    for ch in data:
        wc = w + bytes([ch])
        if wc in table:
            w = wc
            continue
        emit(table[w])
        if free < limit:
            table[wc] = free
            free += 1
        elif clear_when_full and block_mode:
            put(256, state["width"])
            pad()
            state["width"] = 9
            table, free = {bytes([i]): i for i in range(256)}, first
        w = bytes([ch])
    if w:
        emit(table[w])
    if state["nacc"]:
        out.append(state["acc"] & 0xFF)
    return bytes(out)


SHUTTLE_TEXT = b"".join(
    b"%d %d %d %d %d %d %d %d %d %d\n" % (tuple((7 * i + 3 * j) % 50 - 5 for j in range(9)) + (1 + i % 7,))
    for i in range(3000)
)


# ----------------------------------------------------------------------------------- .Z decoding
@pytest.mark.parametrize("max_bits, block_mode, clear", [(16, True, False), (12, True, False), (10, True, True),
                                                         (12, False, False)])
def test_unlzw_round_trip(max_bits, block_mode, clear):
    rng = np.random.default_rng(0)
    samples = [b"", b"a", b"abababababababababab" * 3, rng.integers(0, 256, 3000, dtype=np.uint8).tobytes(),
               SHUTTLE_TEXT]
    for data in samples:
        packed = compress_z(data, max_bits, block_mode, clear)
        assert unlzw(packed) == data
    assert len(compress_z(SHUTTLE_TEXT, max_bits, block_mode, clear)) < len(SHUTTLE_TEXT) // 2


@pytest.mark.skipif(shutil.which("gzip") is None, reason="gzip (which reads .Z streams) is not installed")
def test_fixture_encoder_agrees_with_gzip():
    for args in [(16, True, False), (10, True, True), (12, False, False)]:
        packed = compress_z(SHUTTLE_TEXT, *args)
        done = subprocess.run(["gzip", "-dc"], input=packed, capture_output=True, timeout=30)
        assert done.returncode == 0 and done.stdout == SHUTTLE_TEXT


def test_unlzw_rejects_garbage():
    with pytest.raises(ValueError, match="not a Unix-compress"):
        unlzw(b"<html>moved</html>")


# ----------------------------------------------------------------------------------- real files
@needs_data("magic.dat")
def test_real_magic():
    x, y = load_magic(data_dir=REAL_DIR)
    assert x.shape == (19020, 10) and x.dtype == np.float64 and y.dtype == np.int64
    np.testing.assert_array_equal(np.bincount(y), [12332, 6688])  # g, h
    np.testing.assert_array_equal(x[0], [28.7967, 16.0021, 2.6449, 0.3918, 0.1982, 27.7004, 22.011, -8.2027,
                                         40.092, 81.8828])
    assert y[0] == 0 and y[-1] == 1
    assert x[-1, 9] == pytest.approx(272.3174)


@needs_data("mushroom.dat")
def test_real_mushroom():
    x, y = load_mushroom(data_dir=REAL_DIR)
    assert x.shape == (5644, 98) and x.dtype == np.float64
    np.testing.assert_array_equal(np.bincount(y), [3488, 2156])  # e, p
    np.testing.assert_array_equal(x.sum(axis=1), 22.0)  # one value per attribute
    # first row: x,s,n,t,p,f,c,n,k,e,e,s,s,w,w,p,w,o,p,k,s,u -> class p
    assert y[0] == 1
    raw = np.array([line.split(",")[:22] for line in (REAL_DIR / "mushroom.dat").read_text().split()])
    _, names = onehot_encode(raw, datasets.MUSHROOM_ATTRIBUTES)
    on = [names[j] for j in np.flatnonzero(x[0])]
    assert on[:5] == ["cap-shape=x", "cap-surface=s", "cap-color=n", "bruises=t", "odor=p"]
    assert on[-1] == "habitat=u"
    assert names[:6] == ["cap-shape=b", "cap-shape=c", "cap-shape=f", "cap-shape=k", "cap-shape=s", "cap-shape=x"]
    assert "stalk-root=?" not in names and "veil-type=p" in names


FULL_SHUTTLE = ("shuttle.trn", "shuttle.tst")


@needs_data(*FULL_SHUTTLE)
def test_real_shuttle_is_the_full_data_in_file_order():
    x, y = load_shuttle(data_dir=REAL_DIR)
    assert x.shape == (58000, 9) and x.dtype == np.float64 and y.dtype == np.int64
    # UCI's class counts: training 34108/37/132/6748/2458/6/11 plus test 11478/13/39/2155/809/4/2
    np.testing.assert_array_equal(np.bincount(y, minlength=7), [45586, 50, 171, 8903, 3267, 10, 13])
    np.testing.assert_array_equal(x[0], [50, 21, 77, 0, 28, 0, 27, 48, 22])  # shuttle.trn's first line
    np.testing.assert_array_equal(x[43500], [55, 0, 81, 0, -6, 11, 25, 88, 64])  # shuttle.tst's first line
    assert y[0] == 1 and y[43500] == 3  # classes 2 and 4
    np.testing.assert_array_equal(x, np.round(x))  # raw integers: nothing preprocessed yet


@needs_data(*FULL_SHUTTLE)
def test_full_shuttle_row_norms_after_the_authors_preprocessing():
    """Rows to unit norm, then columns standardised, once, on the raw rows: the row norms the FN-UCB
    authors' contexts have (percentiles 5/50/95: 1.16/2.00/5.34; measured here 1.164/2.002/5.341).
    The standardised 5,000-row subsample preprocessed again gives 2.00/2.56/3.55 instead."""
    x, _ = load_shuttle(data_dir=REAL_DIR)
    norms = np.linalg.norm(authors_preprocess(x), axis=1)
    np.testing.assert_allclose(np.percentile(norms, [5, 50, 95]), [1.16, 2.00, 5.34], atol=0.01)


@needs_data("shuttle_statlog_5000.npz")
def test_shuttle_subsample_only_by_path(tmp_path):
    x, y = load_shuttle(path=REAL_DIR / "shuttle_statlog_5000.npz")
    assert x.shape == (5000, 9) and x.dtype == np.float64 and y.dtype == np.int64
    np.testing.assert_array_equal(np.bincount(y, minlength=7), [3992, 5, 13, 730, 257, 2, 1])
    assert x[0, 0] == pytest.approx(-0.92831903) and x[1, 2] == pytest.approx(0.87577664)
    np.testing.assert_allclose(x.mean(axis=0), 0.0, atol=1e-9)
    alone = tmp_path / "subsample"
    alone.mkdir()
    shutil.copy(REAL_DIR / "shuttle_statlog_5000.npz", alone)
    with pytest.raises(DataNotFoundError, match="shuttle.tst"):  # never the default choice
        load_shuttle(data_dir=alone, download=False)


@needs_data(*FULL_SHUTTLE)
def test_real_data_through_env_var_and_path(monkeypatch):
    monkeypatch.setenv(datasets.DATA_DIR_ENV, str(REAL_DIR))
    x1, y1 = load_dataset("shuttle")
    parts = [load_dataset("shuttle", path=REAL_DIR / name) for name in FULL_SHUTTLE]
    assert [len(y) for _, y in parts] == [43500, 14500]
    np.testing.assert_array_equal(x1, np.concatenate([x for x, _ in parts]))
    np.testing.assert_array_equal(y1, np.concatenate([y for _, y in parts]))
    assert datasets._fetch.calls == []


@needs_data("mushroom.dat")
def test_uci_mushroom_format_matches_project_file(tmp_path):
    """UCI's layout (class first, '?' for missing) gives the same arrays as mushroom.dat."""
    lines = (REAL_DIR / "mushroom.dat").read_text().split()
    uci = [line[-1] + "," + line[:-2] for line in lines[:300]]
    missing = lines[0].split(",")
    missing[10] = "?"
    uci.insert(5, missing[-1] + "," + ",".join(missing[:-1]))
    (tmp_path / "agaricus-lepiota.data").write_text("\n".join(uci) + "\n")
    (tmp_path / "mushroom.dat").write_text("\n".join(lines[:300]) + "\n")
    xu, yu = load_mushroom(path=tmp_path / "agaricus-lepiota.data")
    xk, yk = load_mushroom(path=tmp_path / "mushroom.dat")
    assert xu.shape == xk.shape and xu.shape[0] == 300
    np.testing.assert_array_equal(xu, xk)
    np.testing.assert_array_equal(yu, yk)
    # missing="category": the row with '?' is kept and '?' gets its own stalk-root column
    xc, yc = load_mushroom(path=tmp_path / "agaricus-lepiota.data", missing="category")
    assert xc.shape == (301, xk.shape[1] + 1)
    only_row_5 = [j for j in range(xc.shape[1]) if xc[5, j] == 1 and xc[:, j].sum() == 1]
    assert len(only_row_5) == 1  # the '?' column
    np.testing.assert_array_equal(np.delete(np.delete(xc, 5, axis=0), only_row_5, axis=1), xk)
    with pytest.raises(ConfigError, match="missing must be one of"):
        load_mushroom(path=tmp_path / "mushroom.dat", missing="impute")


# ----------------------------------------------------------------------------------- look-up and errors
def test_missing_file_error_names_file_places_and_fixes(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataNotFoundError) as err:
        load_magic(data_dir=empty)
    msg = str(err.value)
    assert isinstance(err.value, ConfigError)
    assert "\n" not in msg
    for part in ["magic.dat", "magic04.data", str(empty), str(tmp_path / "cache"), "magic04.data failed",
                 "no network in tests", "path=", "data_dir=", datasets.DATA_DIR_ENV]:
        assert part in msg
    assert datasets._fetch.calls == [f"{datasets.UCI_ROOT}/magic/magic04.data"]
    assert not (tmp_path / "cache" / "magic04.data").exists()


def test_missing_file_without_download(tmp_path, monkeypatch):
    monkeypatch.setenv(datasets.DATA_DIR_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(DataNotFoundError) as err:
        load_dataset("shuttle", download=False)
    msg = str(err.value)
    for part in ["shuttle.trn / shuttle.trn.Z and shuttle.tst (all in one directory)", "download disabled",
                 str(tmp_path / "nowhere"), "data_dir="]:
        assert part in msg
    assert "shuttle_statlog_5000.npz" not in msg
    assert datasets._fetch.calls == []
    with pytest.raises(DataNotFoundError, match="does not exist"):
        load_mushroom(path=tmp_path / "no" / "mushroom.dat")
    with pytest.raises(DataNotFoundError, match="shuttle.tst, shuttle_statlog_5000.npz"):
        load_shuttle(path=tmp_path / "no" / "shuttle.trn")


def test_unknown_dataset_and_bad_file(tmp_path):
    with pytest.raises(ConfigError, match="known: magic, mushroom, shuttle"):
        load_dataset("iris")
    bad = tmp_path / "magic.dat"
    bad.write_text("1,2,3,x\n")
    with pytest.raises(ConfigError, match="line 1"):
        load_magic(path=bad)


def test_look_up_order(tmp_path, monkeypatch):
    def magic_file(folder, label):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "magic.dat").write_text(",".join(["1.5"] * 10) + f",{label}\n")
        return folder

    env_dir = magic_file(tmp_path / "env", "h")
    arg_dir = magic_file(tmp_path / "arg", "g")
    monkeypatch.setenv(datasets.DATA_DIR_ENV, str(env_dir))
    assert load_magic(data_dir=arg_dir)[1].tolist() == [0]  # data_dir beats the variable
    assert load_magic()[1].tolist() == [1]  # then the variable
    with pytest.raises(datasets.DataNotFoundError, match="is not an existing folder"):
        load_magic(data_dir=tmp_path / "missing")  # a folder named is never passed over
    monkeypatch.delenv(datasets.DATA_DIR_ENV)
    magic_file(tmp_path / "cache", "g")
    assert load_magic()[1].tolist() == [0]  # then the cache
    assert datasets._fetch.calls == []


# ----------------------------------------------------------------------------------- mocked downloads
def _magic_uci_bytes(rows=25):
    lines = [",".join(f"{(i * 7 + j) % 13 + 0.25:.4f}" for j in range(10)) + ("," + "gh"[i % 3 == 0])
             for i in range(rows)]
    return ("\n".join(lines) + "\n").encode()


def test_download_magic_once(monkeypatch, tmp_path):
    net = FakeNet({f"{datasets.UCI_ROOT}/magic/magic04.data": _magic_uci_bytes()})
    monkeypatch.setattr(datasets, "_fetch", net)
    x, y = load_dataset("magic")
    assert x.shape == (25, 10) and y.tolist()[:4] == [1, 0, 0, 1]
    assert x[1, 2] == pytest.approx(9.25)
    assert (tmp_path / "cache" / "magic04.data").read_bytes() == _magic_uci_bytes()
    x2, y2 = load_dataset("magic")
    assert len(net.calls) == 1  # the second call reads the cache
    np.testing.assert_array_equal(x, x2)
    np.testing.assert_array_equal(y, y2)


def test_download_mushroom_parses_uci_layout(monkeypatch, tmp_path):
    rows = ["p,x,s,n,t,p,f,c,n,k,e,e,s,s,w,w,p,w,o,p,k,s,u",
            "e,x,s,y,t,a,f,c,b,k,e,c,s,s,w,w,p,w,o,p,n,n,g",
            "e,b,s,w,t,l,f,c,b,n,e,?,s,s,w,w,p,w,o,p,n,n,m",  # missing stalk-root: dropped
            "p,f,y,w,t,p,f,c,n,n,e,e,s,s,w,w,p,w,o,p,k,s,d"]
    url = f"{datasets.UCI_ROOT}/mushroom/agaricus-lepiota.data"
    net = FakeNet({url: ("\n".join(rows) + "\n").encode()})
    monkeypatch.setattr(datasets, "_fetch", net)
    x, y = load_mushroom()
    assert y.tolist() == [1, 0, 1]
    # columns: cap-shape {f, x}, cap-surface {s, y}, cap-color {n, w, y}, ...
    np.testing.assert_array_equal(x[:, :7], [[0, 1, 1, 0, 1, 0, 0], [0, 1, 1, 0, 0, 0, 1], [1, 0, 0, 1, 0, 1, 0]])
    np.testing.assert_array_equal(x.sum(axis=1), 22)
    assert (tmp_path / "cache" / "agaricus-lepiota.data").is_file()
    load_mushroom()
    assert net.calls == [url]


SHUTTLE_TEST_TEXT = b"".join(b"%d 0 0 0 0 0 0 0 %d %d\n" % (i, -i, 7 - i % 7) for i in range(40))


def test_download_shuttle_both_parts_in_order_and_caches(monkeypatch, tmp_path):
    trn, tst = (f"{datasets.UCI_ROOT}/statlog/shuttle/shuttle.{ext}" for ext in ("trn.Z", "tst"))
    net = FakeNet({trn: compress_z(SHUTTLE_TEXT), tst: SHUTTLE_TEST_TEXT})
    monkeypatch.setattr(datasets, "_fetch", net)
    x, y = load_shuttle()
    assert net.calls == [trn, tst]
    assert x.shape == (3040, 9) and y.dtype == np.int64
    np.testing.assert_array_equal(np.bincount(y[:3000]), [429, 429, 429, 429, 428, 428, 428])  # UCI 1..7 -> 0..6
    np.testing.assert_array_equal(x[1], [(7 + 3 * j) % 50 - 5 for j in range(9)])
    np.testing.assert_array_equal(x[3000:, 0], np.arange(40))  # the test part after the training part
    np.testing.assert_array_equal(y[3000:3003], [6, 5, 4])
    assert (tmp_path / "cache" / "shuttle.trn").read_bytes() == SHUTTLE_TEXT  # stored decompressed
    assert (tmp_path / "cache" / "shuttle.tst").read_bytes() == SHUTTLE_TEST_TEXT
    x2, _ = load_shuttle()
    assert len(net.calls) == 2
    np.testing.assert_array_equal(x, x2)
    # a part missing from the cache is the only one downloaded again
    (tmp_path / "cache" / "shuttle.tst").unlink()
    np.testing.assert_array_equal(load_shuttle()[0], x)
    assert net.calls == [trn, tst, tst]
    # a compressed file in a data directory works too, alone by path= or with shuttle.tst
    (tmp_path / "z").mkdir()
    (tmp_path / "z" / "shuttle.trn.Z").write_bytes(compress_z(SHUTTLE_TEXT))
    np.testing.assert_array_equal(load_shuttle(path=tmp_path / "z" / "shuttle.trn.Z")[0], x[:3000])
    (tmp_path / "z" / "shuttle.tst").write_bytes(SHUTTLE_TEST_TEXT)
    np.testing.assert_array_equal(load_shuttle(data_dir=tmp_path / "z")[0], x)
    assert len(net.calls) == 3


def test_failed_download_of_one_part_caches_nothing(monkeypatch, tmp_path):
    trn, tst = (f"{datasets.UCI_ROOT}/statlog/shuttle/shuttle.{ext}" for ext in ("trn.Z", "tst"))
    monkeypatch.setattr(datasets, "_fetch", FakeNet({trn: compress_z(SHUTTLE_TEXT), tst: b"<html>Moved</html>\n"}))
    with pytest.raises(DataNotFoundError) as err:
        load_shuttle()
    assert f"downloading {tst} failed" in str(err.value)
    assert not (tmp_path / "cache" / "shuttle.trn").exists()


def test_download_of_garbage_is_not_cached(monkeypatch, tmp_path):
    url = f"{datasets.UCI_ROOT}/magic/magic04.data"
    monkeypatch.setattr(datasets, "_fetch", FakeNet({url: b"<html><body>Moved</body></html>\n"}))
    with pytest.raises(DataNotFoundError) as err:
        load_magic()
    assert "failed" in str(err.value) and "line 1" in str(err.value)
    assert not (tmp_path / "cache" / "magic04.data").exists()


def test_fetch_uses_a_short_timeout(monkeypatch):
    seen = {}

    class Response:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def read(self):
            return b"payload"

    def fake_urlopen(url, timeout=None):
        seen["url"], seen["timeout"] = url, timeout
        return Response()

    monkeypatch.setattr(datasets.urllib.request, "urlopen", fake_urlopen)
    assert REAL_FETCH("https://example.org/x") == b"payload"
    assert seen == {"url": "https://example.org/x", "timeout": datasets.DOWNLOAD_TIMEOUT_SECONDS}
    assert 0 < datasets.DOWNLOAD_TIMEOUT_SECONDS <= 30
