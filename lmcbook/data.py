"""Data sets as device-resident tensors, and batches as index slices.

Every data set has three splits: ``train``, ``cal`` (a calibration split held
out from the training data, used only to fit temperatures) and ``test``.  Two
are embedded and need no download: ``digits``, scikit-learn's 8x8 handwritten
digits (1797 images), and ``mnist1d``, 20,000 one-dimensional signals of length
40 generated offline with the ``mnist1d`` package (Greydanus 2020) and cached in
the store.  Fashion-MNIST, CIFAR-10 and CIFAR-100 are read with
torchvision from ``root``; they download only when ``download=True``.

``mnist`` is the full MNIST, 60,000 training images (5,000 of them held out for
calibration) and 10,000 test images.  ``root`` is either a flat folder of its four
files or torchvision's root (the files in ``MNIST/raw/``), each file plain or
gzipped; every file is checked against MNIST's published MD5 of its uncompressed
bytes (:data:`MNIST_MD5`) before it is used, and a mismatch names the file.
With ``download=True`` and no files there, torchvision downloads them first.

``mnist_standin`` is the *8k/2k MNIST stand-in*: MNIST's official 10,000-image test
split alone (the two ``t10k-*`` files every MNIST download holds), its first 8,000
images to train (800 of them held out for calibration) and its last 2,000 to test.
It is real 784-dimensional MNIST, but not the paper's 60k/10k split; it exists so
that machines without the training split can run on real MNIST, and every number
computed on it says so (:data:`DATASET_LABELS`).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .specs import DATASETS, EMBEDDED, TRANSFORMS, DataSpec, SpecError, check_device, check_int, store_root

log = logging.getLogger("lmcbook.data")

#: Seed of the fixed split of each data set into train, calibration and test.
SPLIT_SEED = 0

_TORCHVISION = {
    "fashion_mnist": ("FashionMNIST", "FashionMNIST/raw", ["train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                                           "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]),
    "cifar10": ("CIFAR10", "cifar-10-batches-py", ["data_batch_1", "data_batch_2", "data_batch_3",
                                                   "data_batch_4", "data_batch_5", "test_batch"]),
    "cifar100": ("CIFAR100", "cifar-100-python", ["train", "test"]),
}
#: The torchvision class of each data set it serves.
TORCHVISION_CLASSES = {name: cls for name, (cls, _, _) in _TORCHVISION.items()}
#: MNIST's four files and the published MD5 of each one's uncompressed bytes (the same digests the README beside
#: the project's copy lists; the training files' gzip bytes may differ when recompressed, their contents may not).
MNIST_MD5 = {
    "train-images-idx3-ubyte": "6bbc9ace898e44ae57da46a324031adb",
    "train-labels-idx1-ubyte": "a25bea736e30d166cdddb491f175f624",
    "t10k-images-idx3-ubyte": "2646ac647ad5339dbf082846283269ea",
    "t10k-labels-idx1-ubyte": "27ae3e4e09519cfbb04c329615203637",
}
#: Calibration examples held out of each torchvision training set.
_CAL_SIZE = 5000
#: The 8k/2k MNIST stand-in: images of MNIST's official test split used to train (the rest test).
STANDIN_TRAIN = 8000
_STANDIN_FILES = ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")

#: How pages name each data set in prose and captions.
DATASET_LABELS = {
    "digits": "scikit-learn's digits (8×8 images)",
    "mnist1d": "MNIST-1D",
    "mnist": "MNIST",
    "mnist_standin": "the 8k/2k MNIST stand-in (MNIST's official test split: 8,000 images to train, 2,000 to test)",
    "fashion_mnist": "Fashion-MNIST",
    "cifar10": "CIFAR-10",
    "cifar100": "CIFAR-100",
}
#: Short names for tables and legends.
DATASET_SHORT = {"digits": "digits", "mnist1d": "MNIST-1D", "mnist": "MNIST",
                 "mnist_standin": "8k/2k MNIST stand-in", "fashion_mnist": "Fashion-MNIST", "cifar10": "CIFAR-10",
                 "cifar100": "CIFAR-100"}


class DataError(FileNotFoundError):
    """A data set is missing or unreadable; the message says how to get it."""


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """Return the torch device for ``device``: "auto" picks CUDA when available, else CPU."""
    if isinstance(device, torch.device):
        return device
    if check_device(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise SpecError(f"device={device!r} is not allowed here: CUDA is not available (use 'auto' or 'cpu')")
    return torch.device(device)


@dataclass
class Dataset:
    """Three normalised splits on one device, with labels as int64."""

    name: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_cal: torch.Tensor
    y_cal: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    num_classes: int

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Return the shape of one input, (C, H, W) for images or (D,) for vectors."""
        return tuple(self.x_train.shape[1:])

    @property
    def device(self) -> torch.device:
        """Return the device the tensors live on."""
        return self.x_train.device

    def split(self, name: str) -> tuple[torch.Tensor, torch.Tensor]:
        """Return (x, y) of the split ``name`` in {'train', 'cal', 'test'}."""
        if name not in ("train", "cal", "test"):
            raise SpecError(f"split={name!r} is not allowed: expected one of 'train', 'cal', 'test'")
        return getattr(self, f"x_{name}"), getattr(self, f"y_{name}")

    def sizes(self) -> dict[str, int]:
        """Return the number of examples in each split."""
        return {s: len(self.split(s)[1]) for s in ("train", "cal", "test")}


_CACHE: dict[tuple, Dataset] = {}


def load(name: str = "digits", root: str | Path | None = None, device: str | torch.device = "auto",
         download: bool = False, transform: str = "none", standardize: bool = True) -> Dataset:
    """Return the data set ``name`` on ``device``, with an input ``transform`` (cached per process); its inputs
    standardised with the training split's statistics (per channel for images; what every run of the book trains
    on), or with ``standardize=False`` as the data set gives them (pixels in [0, 1])."""
    if name not in DATASETS:
        raise SpecError(f"dataset={name!r} is not allowed: expected one of {', '.join(map(repr, DATASETS))}")
    if transform not in TRANSFORMS:
        raise SpecError(f"transform={transform!r} is not allowed: expected one of {', '.join(map(repr, TRANSFORMS))}")
    dev = resolve_device(device)
    key = (name, str(root) if root is not None else None, str(dev), transform) + (() if standardize else ("raw",))
    if key not in _CACHE:
        if transform != "none":
            base = load(name, root, dev, download, standardize=standardize)
            _CACHE[key] = Dataset(base.name, *(_apply_transform(t, transform) if i % 2 == 0 else t
                                               for i, t in enumerate((base.x_train, base.y_train, base.x_cal,
                                                                      base.y_cal, base.x_test, base.y_test))),
                                  num_classes=base.num_classes)
        else:
            if name == "digits":
                arrays = _digits_arrays()
            elif name == "mnist1d":
                arrays = _mnist1d_arrays()
            elif name == "mnist_standin":
                arrays = _standin_arrays(root)
            elif name == "mnist":
                arrays = _mnist_arrays(root, download)
            else:
                arrays = _torchvision_arrays(name, root, download)
            # on the GPU, image sets are kept in fp16 (half the memory and bandwidth); batches are cast on use
            store_half = dev.type == "cuda" and name not in EMBEDDED
            _CACHE[key] = _to_dataset(name, *arrays, device=dev, dtype=torch.float16 if store_half else torch.float32,
                                      standardize=standardize)
    return _CACHE[key]


def load_spec(spec: DataSpec, device: str | torch.device = "auto") -> Dataset:
    """Return the data set a :class:`~lmcbook.specs.DataSpec` names (downloaded into its root if it says so)."""
    return load(spec.name, spec.root, device, download=spec.download, transform=spec.transform)


def _apply_transform(x: torch.Tensor, transform: str) -> torch.Tensor:
    """Return the inputs under a task transform: time/width reversed, or negated."""
    if transform == "reverse":
        return x.flip(-1).contiguous()
    if transform == "negate":
        return -x
    return x


#: MNIST-1D as generated here: 20,000 samples, the package's default shape arguments and seed.
MNIST1D_SAMPLES = 20_000


def dataset_cache() -> Path:
    """Return the directory that caches generated data sets (inside the store root)."""
    return store_root() / "datasets"


def _mnist1d_arrays():
    path = dataset_cache() / f"mnist1d-{MNIST1D_SAMPLES}-seed42.npz"
    if path.exists():
        with np.load(path, allow_pickle=False) as z:
            x, y, xt, yt = z["x"], z["y"], z["x_test"], z["y_test"]
    else:
        from mnist1d.data import get_dataset_args, make_dataset

        args = get_dataset_args()
        args.num_samples = MNIST1D_SAMPLES
        state = np.random.get_state()  # make_dataset reseeds numpy's global generator; restore it after
        try:
            d = make_dataset(args)
        finally:
            np.random.set_state(state)
        x, y, xt, yt = d["x"], d["y"], d["x_test"], d["y_test"]
        try:  # caching is best effort: a read-only store still gives the data set
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
            np.savez(tmp, x=x, y=y, x_test=xt, y_test=yt)
            os.replace(tmp, path)
        except OSError as err:
            log.warning("MNIST-1D was generated but not cached in %s (%s)", path.parent, err.strerror)
    x, y = x.astype(np.float32), y.astype(np.int64)
    train, cal, _ = split_indices(len(y), n_cal=1000)
    return x[train], y[train], x[cal], y[cal], xt.astype(np.float32), yt.astype(np.int64), 10


def _digits_arrays():
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = bunch.images.astype(np.float32)[:, None] / 16.0  # (N, 1, 8, 8) in [0, 1]
    y = bunch.target.astype(np.int64)
    train, cal, test = split_indices(len(y), n_cal=180, n_test=360)
    return x[train], y[train], x[cal], y[cal], x[test], y[test], 10


def split_indices(n: int, n_cal: int, n_test: int = 0, seed: int = SPLIT_SEED):
    """Return disjoint index arrays (train, cal, test) covering range(n), from a seeded permutation."""
    if n_cal + n_test >= n:
        raise SpecError(f"n_cal + n_test = {n_cal + n_test} is not allowed: expected fewer than n = {n}")
    perm = np.random.default_rng(seed).permutation(n)
    return perm[n_cal + n_test:], perm[n_test:n_test + n_cal], perm[:n_test]


def _idx_bytes(path: Path) -> bytes:
    """Return the uncompressed bytes of an IDX file, plain or gzipped."""
    import gzip

    with (gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")) as f:
        return f.read()


def read_idx(path: Path, raw: bytes | None = None) -> np.ndarray:
    """Return the array of an IDX file (MNIST's format), plain or gzipped: uint8 images (N, H, W) or labels (N,)
    (``raw``: its uncompressed bytes, if already read)."""
    raw = _idx_bytes(path) if raw is None else raw
    magic = int.from_bytes(raw[:4], "big")
    if magic >> 8 != 0x08 or not 1 <= magic & 0xFF <= 3:
        raise DataError(f"{path} is not an IDX file of unsigned bytes (magic number {magic:#010x})")
    ndim = magic & 0xFF
    shape = tuple(int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    body = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(shape)):
        raise DataError(f"{path} is truncated: its header says {shape}, it holds {body.size} bytes")
    return body.reshape(shape)


def _mnist_file(root: Path, name: str) -> Path | None:
    """Return MNIST file ``name`` (plain or .gz) in the flat folder ``root`` or in torchvision's ``root/MNIST/raw``,
    or None."""
    for folder in (root, root / "MNIST" / "raw"):
        for candidate in (folder / name, folder / f"{name}.gz"):
            if candidate.is_file():
                return candidate
    return None


def _standin_file(root: Path, name: str) -> Path:
    if (path := _mnist_file(root, name)) is not None:
        return path
    raise DataError(f"dataset='mnist_standin': data_root={str(root)!r} lacks {name} (or {name}.gz), in it or in "
                    "MNIST/raw/. Point data_root at a folder holding MNIST's official test split, for example a "
                    "torchvision MNIST root.")


def _mnist_paths(root, download: bool = False) -> list[Path] | None:
    """Return the four MNIST files under ``root`` (flat or torchvision's layout, plain or .gz), None if all are
    missing and ``download`` lets torchvision fetch them; else raise DataError naming the first missing file."""
    if root is None:
        raise DataError("dataset='mnist' needs data_root: a folder holding MNIST's four files "
                        f"({', '.join(MNIST_MD5)}; plain or .gz), "
                        "flat or in torchvision's MNIST/raw/. Pass data_root=PATH, and download=True to fetch them "
                        "once (for example: lmcbook execute -p dataset mnist -p data_root ~/data -p download true).")
    root = Path(root).expanduser()
    found = {name: _mnist_file(root, name) for name in MNIST_MD5}
    missing = [name for name, path in found.items() if path is None]
    if missing and download and len(missing) == len(found):
        return None
    if missing:
        raise DataError(f"dataset='mnist': data_root={str(root)!r} lacks {missing[0]} (or {missing[0]}.gz)"
                        f"{f' and {len(missing) - 1} more file(s)' if len(missing) > 1 else ''}, in it or in "
                        f"MNIST/raw/. Expected {', '.join(MNIST_MD5)}. Download them once with download=True "
                        "(torchvision.datasets.MNIST(root, download=True)) or copy them there.")
    return [found[name] for name in MNIST_MD5]


def _checked_idx(path: Path, name: str) -> np.ndarray:
    """Return MNIST file ``path``'s array, or raise DataError naming it unless its uncompressed bytes have MNIST's
    published MD5 (:data:`MNIST_MD5`)."""
    import hashlib

    raw = _idx_bytes(path)
    got = hashlib.md5(raw, usedforsecurity=False).hexdigest()
    if got != MNIST_MD5[name]:
        raise DataError(f"dataset='mnist': {path} does not match MNIST's published checksum of {name}: the MD5 of its "
                        f"uncompressed bytes is {got}, expected {MNIST_MD5[name]}. The file is damaged or not "
                        "MNIST's; download it again (download=True into an empty data_root) or copy the original.")
    return read_idx(path, raw)


def _mnist_arrays(root, download: bool):
    """Return full MNIST's splits: 55,000 training images, 5,000 held out of the training split for calibration,
    and the 10,000 test images, in [0, 1]."""
    paths = _mnist_paths(root, download)
    if paths is None:  # nothing there yet: torchvision downloads the files into root/MNIST/raw
        import torchvision.datasets as tvd

        tvd.MNIST(str(Path(root).expanduser()), train=True, download=True)
        paths = _mnist_paths(root)
    x_tr, y_tr, x_te, y_te = (_checked_idx(p, name) for p, name in zip(paths, MNIST_MD5))
    x_tr, x_te = (x.astype(np.float32)[:, None] / 255.0 for x in (x_tr, x_te))
    y_tr, y_te = y_tr.astype(np.int64), y_te.astype(np.int64)
    train, cal, _ = split_indices(len(y_tr), n_cal=min(_CAL_SIZE, len(y_tr) // 10))
    return x_tr[train], y_tr[train], x_tr[cal], y_tr[cal], x_te, y_te, 10


def check_available(name: str, root: str | Path | None = None, download: bool = False) -> None:
    """Raise DataError, saying how to get them, unless the files of data set ``name`` are where ``load`` will look
    (only whether they exist: nothing is read; a data set to be downloaded, or generated, passes)."""
    if name == "mnist_standin":
        _standin_paths(root)
    elif name == "mnist":
        _mnist_paths(root, download)
    elif name not in EMBEDDED and name in _TORCHVISION:
        _check_torchvision(name, root, download)


def _standin_paths(root) -> list[Path]:
    if root is None:
        raise DataError("dataset='mnist_standin' needs data_root: a folder holding MNIST's official test split "
                        f"({', '.join(_STANDIN_FILES)}, plain or .gz), for example a torchvision MNIST root")
    return [_standin_file(Path(root).expanduser(), f) for f in _STANDIN_FILES]


def _standin_arrays(root):
    x, y = (read_idx(p) for p in _standin_paths(root))
    if x.shape != (10_000, 28, 28) or y.shape != (10_000,):
        raise DataError(f"dataset='mnist_standin': expected MNIST's official test split, 10,000 images of 28×28 and "
                        f"10,000 labels; {str(root)!r} holds images {x.shape} and labels {y.shape}")
    x = x.astype(np.float32)[:, None] / 255.0
    y = y.astype(np.int64)
    x_tr, y_tr, x_te, y_te = x[:STANDIN_TRAIN], y[:STANDIN_TRAIN], x[STANDIN_TRAIN:], y[STANDIN_TRAIN:]
    train, cal, _ = split_indices(len(y_tr), n_cal=min(_CAL_SIZE, len(y_tr) // 10))
    return x_tr[train], y_tr[train], x_tr[cal], y_tr[cal], x_te, y_te, 10


def _check_torchvision(name: str, root, download: bool) -> Path:
    """Return the torchvision root of data set ``name``, or raise DataError unless its files are there (or are to
    be downloaded)."""
    cls_name, sub, files = _TORCHVISION[name]
    if root is None:
        raise DataError(
            f"dataset={name!r} needs data_root: a directory holding (or receiving) the torchvision files "
            f"under {sub}/. Pass data_root=PATH, and download=True to fetch them once "
            f"(for example: lmcbook execute -p dataset {name} -p data_root ~/data -p download true)."
        )
    root = Path(root).expanduser()
    if not download:
        missing = [f for f in files if not (root / sub / f).exists()]
        if missing:
            raise DataError(
                f"dataset={name!r}: data_root={str(root)!r} lacks {sub}/{missing[0]}"
                f"{f' and {len(missing) - 1} more file(s)' if len(missing) > 1 else ''}. "
                f"Expected {', '.join(files)} in {root / sub}. Download them once with download=True "
                f"(torchvision.datasets.{cls_name}(root, download=True)) or copy them there."
            )
    return root


def _torchvision_arrays(name: str, root, download: bool):
    import torchvision.datasets as tvd

    root = _check_torchvision(name, root, download)
    cls = getattr(tvd, _TORCHVISION[name][0])
    try:
        tr = cls(str(root), train=True, download=download)
        te = cls(str(root), train=False, download=download)
    except RuntimeError as err:  # torchvision's "Dataset not found or corrupted"
        raise DataError(f"dataset={name!r}: torchvision could not read data_root={str(root)!r}: {err}") from err
    x_tr, y_tr = _tv_arrays(tr)
    x_te, y_te = _tv_arrays(te)
    train, cal, _ = split_indices(len(y_tr), n_cal=min(_CAL_SIZE, len(y_tr) // 10))
    num_classes = 100 if name == "cifar100" else 10
    return x_tr[train], y_tr[train], x_tr[cal], y_tr[cal], x_te, y_te, num_classes


def _tv_arrays(ds) -> tuple[np.ndarray, np.ndarray]:
    """Return (x in [0, 1] as (N, C, H, W) float32, y as int64) from a torchvision data set."""
    data = ds.data.numpy() if isinstance(ds.data, torch.Tensor) else np.asarray(ds.data)
    if data.ndim == 3:  # MNIST-like: (N, H, W)
        data = data[:, None]
    else:  # CIFAR: (N, H, W, C)
        data = data.transpose(0, 3, 1, 2)
    targets = ds.targets.numpy() if isinstance(ds.targets, torch.Tensor) else np.asarray(ds.targets)
    return data.astype(np.float32) / 255.0, targets.astype(np.int64)


def from_arrays(name: str, x_train, y_train, x_cal, y_cal, x_test, y_test, num_classes: int,
                device: str | torch.device = "auto", standardize: bool = True) -> Dataset:
    """Return a Dataset built from arrays in [0, 1], normalised with the training split's channel statistics (with
    ``standardize=False``: as given).

    Raise SpecError, naming the split, unless every split has as many labels as inputs (at least one), finite
    inputs of one shape, and integer labels in [0, num_classes - 1].
    """
    num_classes = check_int("num_classes", num_classes, lo=2)
    splits = {"train": (x_train, y_train), "cal": (x_cal, y_cal), "test": (x_test, y_test)}
    shape = None
    for split, (x, y) in splits.items():
        shape = check_split(split, np.asarray(x), np.asarray(y), num_classes, shape)
    return _to_dataset(name, x_train, y_train, x_cal, y_cal, x_test, y_test, num_classes, resolve_device(device),
                       standardize=standardize)


def check_split(split: str, x: np.ndarray, y: np.ndarray, num_classes: int,
                 shape: tuple[int, ...] | None) -> tuple[int, ...]:
    """Raise SpecError naming ``x_SPLIT`` / ``y_SPLIT`` unless they fit together; return the input shape."""
    if x.ndim < 2 or len(x) == 0:
        raise SpecError(f"x_{split} of shape {x.shape} is not allowed: expected (N, ...) with N >= 1 inputs")
    if shape is not None and x.shape[1:] != shape:
        raise SpecError(f"x_{split} of shape {x.shape} is not allowed: expected inputs of shape {shape}, as x_train")
    if not np.issubdtype(x.dtype, np.number) or not np.isfinite(x).all():
        raise SpecError(f"x_{split} is not allowed: expected finite numbers (it holds "
                        f"{'non-numbers' if not np.issubdtype(x.dtype, np.number) else 'NaN or inf'})")
    if y.shape != (len(x),):
        hint = f" (one-hot rows? pass y_{split}.argmax(1))" if y.ndim == 2 and y.shape[0] == len(x) else ""
        raise SpecError(f"y_{split} of shape {y.shape} is not allowed: expected shape ({len(x)},), one label per "
                        f"input of x_{split}{hint}")
    if not np.issubdtype(y.dtype, np.integer) and not (np.issubdtype(y.dtype, np.floating)
                                                        and np.all(np.mod(y, 1) == 0)):
        raise SpecError(f"y_{split} is not allowed: expected integer class labels")
    if y.min() < 0 or y.max() >= num_classes:
        raise SpecError(f"y_{split} holds labels in [{y.min():g}, {y.max():g}], which is not allowed: expected "
                        f"labels in [0, {num_classes - 1}] (num_classes={num_classes})")
    return x.shape[1:]


def _to_dataset(name, x_train, y_train, x_cal, y_cal, x_test, y_test, num_classes, device,
                dtype: torch.dtype = torch.float32, standardize: bool = True) -> Dataset:
    x_train = np.asarray(x_train, dtype=np.float32)
    # images: per-channel statistics; signals (N, L): one scalar, so that shifts stay meaningful
    axes = (0, 1) if x_train.ndim == 2 else (0,) + tuple(range(2, x_train.ndim))
    mean = x_train.mean(axis=axes, keepdims=True)[0] if standardize else np.float32(0)
    std = x_train.std(axis=axes, keepdims=True)[0] + 1e-6 if standardize else np.float32(1)

    def prep(x, y):
        x = (np.asarray(x, dtype=np.float32) - mean) / std
        return (torch.from_numpy(np.ascontiguousarray(x)).to(device, dtype),
                torch.from_numpy(np.asarray(y, dtype=np.int64)).to(device))

    tr, ca, te = prep(x_train, y_train), prep(x_cal, y_cal), prep(x_test, y_test)
    return Dataset(name, *tr, *ca, *te, num_classes=int(num_classes))


def epoch_seed(data_seed: int, epoch: int) -> int:
    """Return the 63-bit seed of one epoch's batch order, a pure function of (data_seed, epoch)."""
    state = np.random.SeedSequence([int(data_seed), int(epoch)]).generate_state(2, dtype=np.uint32)
    return int((int(state[0]) << 31) ^ int(state[1]))


def epoch_batches(n: int, batch_size: int, data_seed: int, epoch: int,
                  device: str | torch.device = "cpu") -> torch.Tensor:
    """Return the index matrix (steps_per_epoch, batch_size) of one epoch; the last partial batch is dropped."""
    g = torch.Generator().manual_seed(epoch_seed(data_seed, epoch))
    perm = torch.randperm(n, generator=g)
    steps = n // batch_size
    return perm[: steps * batch_size].view(steps, batch_size).to(device)


#: Largest random shift, in pixels (positions for mnist1d), of each data set's augmentation.
_MAX_SHIFT = {"digits": 1, "mnist1d": 3, "mnist": 2, "mnist_standin": 2, "fashion_mnist": 2, "cifar10": 4,
              "cifar100": 4}


def max_shift(name: str) -> int:
    """Return the largest random shift of data set ``name``'s augmentation, in pixels (positions for signals)."""
    return _MAX_SHIFT.get(name, 2)


def augment_batch(x: torch.Tensor, name: str, aug_seed: int, step: int) -> torch.Tensor:
    """Return a randomly shifted (and, for CIFAR, horizontally flipped) copy of a batch.

    The draw is a pure function of (aug_seed, step) and runs batched on x's device:
    each input is zero-padded by the data set's maximum shift and cropped back at a
    random offset, which is a random translation (random crop for CIFAR).  Images
    (N, C, H, W) shift in both directions; signals (N, L) along their length.
    """
    g = torch.Generator().manual_seed(epoch_seed(aug_seed, step) ^ 0x5EED)
    if x.ndim == 2:
        n, length = x.shape
        s = max_shift(name)
        d = torch.randint(0, 2 * s + 1, (n,), generator=g).to(x.device)
        padded = torch.nn.functional.pad(x, (s, s))
        idx = torch.arange(length, device=x.device)[None, :] + d[:, None]
        return padded.gather(1, idx)
    if x.ndim != 4:
        raise SpecError(f"augment=True needs image batches (N, C, H, W) or signals (N, L); got shape {tuple(x.shape)}")
    n, _, h, w = x.shape
    s = max_shift(name)
    dy = torch.randint(0, 2 * s + 1, (n,), generator=g).to(x.device)
    dx = torch.randint(0, 2 * s + 1, (n,), generator=g).to(x.device)
    padded = torch.nn.functional.pad(x, (s, s, s, s))
    rows = (torch.arange(h, device=x.device)[None, :] + dy[:, None])[:, :, None]  # (N, H, 1)
    cols = (torch.arange(w, device=x.device)[None, :] + dx[:, None])[:, None, :]  # (N, 1, W)
    out = padded[torch.arange(n, device=x.device)[:, None, None], :, rows, cols]  # (N, H, W, C)
    out = out.permute(0, 3, 1, 2)
    if name.startswith("cifar"):
        flip = (torch.rand(n, generator=g) < 0.5).to(x.device)
        out = torch.where(flip[:, None, None, None], out.flip(3), out)
    return out.contiguous()
