import gzip
import hashlib
import pickle
import struct

import numpy as np
import pytest
import torch

from lmcbook import data as D
from lmcbook.specs import SpecError


def test_digits_split_sizes_and_normalisation(digits):
    assert digits.sizes() == {"train": 1257, "cal": 180, "test": 360}
    assert digits.input_shape == (1, 8, 8) and digits.num_classes == 10
    assert abs(float(digits.x_train.mean())) < 1e-4
    assert abs(float(digits.x_train.std()) - 1) < 1e-2
    assert set(digits.y_test.tolist()) == set(range(10))


def test_split_indices_are_disjoint_cover_and_seeded():
    tr, ca, te = D.split_indices(100, n_cal=10, n_test=20)
    assert (len(tr), len(ca), len(te)) == (70, 10, 20)
    allidx = np.concatenate([tr, ca, te])
    assert sorted(allidx.tolist()) == list(range(100))
    tr2, _, _ = D.split_indices(100, n_cal=10, n_test=20)
    assert np.array_equal(tr, tr2)
    with pytest.raises(SpecError, match="n_cal"):
        D.split_indices(10, n_cal=5, n_test=5)


def test_epoch_batches_pure_function_of_seed_and_epoch():
    a = D.epoch_batches(100, 16, data_seed=3, epoch=2)
    assert a.shape == (6, 16)
    assert torch.equal(a, D.epoch_batches(100, 16, data_seed=3, epoch=2))
    assert not torch.equal(a, D.epoch_batches(100, 16, data_seed=3, epoch=3))
    assert not torch.equal(a, D.epoch_batches(100, 16, data_seed=4, epoch=2))
    assert len(set(a.flatten().tolist())) == 96  # no index twice within an epoch


def test_augment_is_a_seeded_translation():
    x = torch.zeros(5, 1, 8, 8)
    x[:, 0, 4, 4] = 1.0
    out = D.augment_batch(x, "digits", aug_seed=1, step=7)
    assert torch.equal(out, D.augment_batch(x, "digits", aug_seed=1, step=7))
    assert not torch.equal(out, D.augment_batch(x, "digits", aug_seed=1, step=8))
    for img in out:
        r, c = (img[0] == 1).nonzero()[0].tolist()
        assert abs(r - 4) <= 1 and abs(c - 4) <= 1 and float(img.sum()) == 1.0


def write_idx(root, sub, n_train=30, n_test=10, gz=False, monkeypatch=None):
    """Write tiny fake MNIST-format files into ``root/sub`` ("" for a flat folder), gzipped if ``gz``; return the
    MD5 of each file's uncompressed bytes.  With ``monkeypatch``, make them the checksums ``mnist`` checks against
    (tiny fakes cannot carry MNIST's own)."""
    raw = root / sub
    raw.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    digests = {}
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        imgs = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = (np.arange(n) % 10).astype(np.uint8)
        for name, payload in ((f"{prefix}-images-idx3-ubyte", struct.pack(">IIII", 0x803, n, 28, 28) + imgs.tobytes()),
                              (f"{prefix}-labels-idx1-ubyte", struct.pack(">II", 0x801, n) + labels.tobytes())):
            if gz:
                (raw / f"{name}.gz").write_bytes(gzip.compress(payload))
            else:
                (raw / name).write_bytes(payload)
            digests[name] = hashlib.md5(payload).hexdigest()
    if monkeypatch is not None:
        monkeypatch.setattr(D, "MNIST_MD5", digests)
    return digests


@pytest.mark.parametrize("name, sub", [("mnist", "MNIST/raw"), ("fashion_mnist", "FashionMNIST/raw")])
def test_torchvision_idx_files(tmp_path, name, sub, monkeypatch):
    write_idx(tmp_path, sub, monkeypatch=monkeypatch)
    ds = D.load(name, tmp_path, device="cpu")
    assert ds.sizes() == {"train": 27, "cal": 3, "test": 10}
    assert ds.input_shape == (1, 28, 28)
    assert ds.y_test.tolist() == [i % 10 for i in range(10)]


@pytest.mark.parametrize("sub, gz", [("", False), ("", True), ("MNIST/raw", True)])
def test_mnist_reads_a_flat_folder_or_torchvisions_layout_plain_or_gzipped(tmp_path, monkeypatch, sub, gz):
    """Full MNIST from the four files, flat or in torchvision's MNIST/raw, plain or .gz: the same arrays as the plain
    torchvision layout, and the calibration split held out of the training split (never the test split)."""
    write_idx(tmp_path / "ref", "MNIST/raw", n_train=60, n_test=20, monkeypatch=monkeypatch)
    write_idx(tmp_path / "got", sub, n_train=60, n_test=20, gz=gz)
    ref, got = D.load("mnist", tmp_path / "ref", device="cpu"), D.load("mnist", tmp_path / "got", device="cpu")
    assert got.sizes() == {"train": 54, "cal": 6, "test": 20}
    for a, b in zip((ref.x_train, ref.y_train, ref.x_cal, ref.y_cal, ref.x_test, ref.y_test),
                    (got.x_train, got.y_train, got.x_cal, got.y_cal, got.x_test, got.y_test)):
        assert torch.equal(a, b)
    # the test split is the t10k files in order; train and cal partition the training file
    assert got.y_test.tolist() == [i % 10 for i in range(20)]
    assert sorted(got.y_train.tolist() + got.y_cal.tolist()) == sorted(i % 10 for i in range(60))
    D.check_available("mnist", tmp_path / "got")


def test_mnist_checksum_mismatch_names_the_file_before_anything_is_used(tmp_path, monkeypatch):
    digests = write_idx(tmp_path, "", monkeypatch=monkeypatch)
    labels = tmp_path / "t10k-labels-idx1-ubyte"
    body = bytearray(labels.read_bytes())
    body[-1] = (body[-1] + 1) % 10  # one label changed: a damaged file
    labels.write_bytes(bytes(body))
    with pytest.raises(D.DataError) as err:
        D.load("mnist", tmp_path, device="cpu")
    msg = str(err.value)
    assert "t10k-labels-idx1-ubyte" in msg and digests["t10k-labels-idx1-ubyte"] in msg and "checksum" in msg
    assert hashlib.md5(bytes(body)).hexdigest() in msg


def test_mnist_checks_the_published_checksums_by_default(tmp_path):
    """Without a patched table, tiny fakes fail: the four published MD5s are the ones checked."""
    assert D.MNIST_MD5 == {"train-images-idx3-ubyte": "6bbc9ace898e44ae57da46a324031adb",
                           "train-labels-idx1-ubyte": "a25bea736e30d166cdddb491f175f624",
                           "t10k-images-idx3-ubyte": "2646ac647ad5339dbf082846283269ea",
                           "t10k-labels-idx1-ubyte": "27ae3e4e09519cfbb04c329615203637"}
    write_idx(tmp_path, "")
    with pytest.raises(D.DataError, match="train-images-idx3-ubyte.*published checksum"):
        D.load("mnist", tmp_path, device="cpu")


def test_mnist_missing_file_is_named(tmp_path, monkeypatch):
    write_idx(tmp_path, "", monkeypatch=monkeypatch)
    (tmp_path / "train-labels-idx1-ubyte").unlink()
    for call in (lambda: D.check_available("mnist", tmp_path), lambda: D.load("mnist", tmp_path, device="cpu")):
        with pytest.raises(D.DataError, match="lacks train-labels-idx1-ubyte.*download=True"):
            call()


def test_cifar10_format(tmp_path, monkeypatch):
    import torchvision.datasets as tvd
    import torchvision.datasets.cifar as tvcifar

    # tiny fake files fail torchvision's MD5 checks, so this test bypasses them (TOOLCHAIN.md)
    monkeypatch.setattr(tvd.CIFAR10, "_check_integrity", lambda self: True)
    monkeypatch.setattr(tvcifar, "check_integrity", lambda path, md5=None: True)
    base = tmp_path / "cifar-10-batches-py"
    base.mkdir()
    rng = np.random.default_rng(0)
    for name in ["data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5", "test_batch"]:
        x = rng.integers(0, 256, (10, 3072), dtype=np.uint8)
        x[0] = 0
        x[0, :1024] = 255  # image 0: red channel saturated, green and blue black
        with open(base / name, "wb") as f:
            pickle.dump({"data": x, "labels": list(range(10))}, f)
    with open(base / "batches.meta", "wb") as f:
        pickle.dump({"label_names": [str(i) for i in range(10)]}, f)
    ds = D.load("cifar10", tmp_path, device="cpu")
    assert ds.sizes() == {"train": 45, "cal": 5, "test": 10}
    assert ds.input_shape == (3, 32, 32)
    img = ds.x_test[0]
    assert float(img[0].min()) > float(img[1].max()) and float(img[0].min()) > float(img[2].max())


def test_missing_data_root_says_how_to_get_it(tmp_path):
    with pytest.raises(D.DataError, match="data_root"):
        D.load("mnist", None)
    with pytest.raises(D.DataError) as err:
        D.load("cifar10", tmp_path / "nowhere")
    assert "download=True" in str(err.value) and "data_batch_1" in str(err.value)


def test_unknown_dataset_and_device():
    with pytest.raises(SpecError, match="dataset='svhn'.*'digits'"):
        D.load("svhn")
    with pytest.raises(SpecError, match="device='tpu'"):
        D.resolve_device("tpu")
