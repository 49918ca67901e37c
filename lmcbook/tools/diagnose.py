"""``lmcbook diagnose``: the book's measurements on a reader's own checkpoints.

:func:`prepare` resolves and checks everything (model, checkpoints, data, permutation
spec, output folder) before any compute and raises a :class:`~lmcbook.specs.SpecError`
naming what is wrong.  :func:`diagnose` then measures, reusing the library's tested
functions: :func:`lmcbook.merge.pair_summary` (interpolation curve, raw and calibrated
barriers, logit ensemble, logit norm ratio), :class:`lmcbook.probes.PairActivations`
(LEWC and LLFC per layer, weak additivity, reciprocal orthogonality) against an untrained
pair of the same architecture, :func:`lmcbook.probes.rank_profile`,
:func:`lmcbook.merge.weight_matching` with REPAIR, and, for K >= 3 checkpoints, the uniform
soup against the K-model ensemble.  :func:`write` renders the result.  Reading a checkpoint safely (safetensors, or a
``weights_only`` state dict) and the report (:func:`check_out`, :func:`write`: HTML, CSV and JSON) are the module's last
two sections.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import importlib
import importlib.util
import io
import itertools
import json
import math
import os
import pickle
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
import yaml
from torch import nn
from tqdm.auto import tqdm

from .. import __version__, data, merge, models, plots_width, probes
from ..data import DataError, Dataset
from ..files import show_progress
from ..merge import SpecUnavailable, check_spec, derive_spec
from ..specs import ARCHS, DATASETS, ModelSpec, SpecError

DEFAULT_LAMS = 11  #: λ points of a diagnosis (the book's pages use 21): each costs a pass per pair and method
CAL_FRACTION = 0.1  #: the share of an .npz's training split held out for calibration when it has no x_cal
PROBE_EXAMPLES = 512  #: test inputs the layer probes read (the whole test split when it is smaller)
CHECK_EXAMPLES = 64  #: examples of each split that ``--check`` reads (to trace the model and check the spec)
SPEC_TOL = 1e-4  #: the largest relative output change a random permutation of a derived spec may cause
UNTRAINED_SEEDS = (0, 1)  #: seeds of the untrained baseline pair
# thresholds of the generated reading (ours; the report says what each sentence was read from)
SMALL_ACC_BARRIER = 0.02  #: an accuracy barrier below this is "no barrier"
TEMPERATURE_SHARE = 0.5  #: calibration removes "most" of the raw loss barrier when it keeps less than this share
CLOSED_SHARE = 0.5  #: weight matching closes "most" of the gap when it removes more than this share
LEWC_BETTER = 0.9  #: LEWC describes a trained pair "better" when its error is below this share of the untrained pair's
SOUP_DROP = 0.05  #: a soup "falls" when it is this much below the best single model's accuracy
# what the inputs must allow before any sentence is read (:func:`input_problems`)
ABOVE_CHANCE_POINTS = 0.1  #: every endpoint must score at least this much above chance (1 / classes) on the test
#: split, and at least chance again (twice chance), but never more than halfway from chance to perfect (two classes)
MAX_ACC_HALF_WIDTH = 0.05  #: the widest 95% interval (half-width) of a test accuracy that the reading still reads


@dataclass
class Prepared:
    """Checked inputs: the models (on the device, eval mode), the data, a fresh-model factory and the spec."""

    paths: list[str]
    models: list[nn.Module]
    factory: Callable[[], nn.Module]
    data: Dataset
    model_name: str
    data_name: str
    spec: merge.PermutationSpec | None
    spec_note: str
    lams: tuple[float, ...]
    #: The layers (weights) whose output units a given ``--spec`` leaves in their order, the output layer aside:
    #: a partial spec, which can show what matching those units does but not whether the rest is a permutation.
    unpermuted: list[str] = field(default_factory=list)
    #: How the inputs were preprocessed, said in the report (:func:`preprocess_words`).
    preprocess: str = ""


@dataclass
class Diagnosis:
    """What :func:`diagnose` measured: tidy frames, one summary row per pair and method, and the reading."""

    prepared: Prepared
    depth: int
    pairs: pd.DataFrame
    curves: pd.DataFrame
    layers: pd.DataFrame
    theory: pd.DataFrame
    ranks: pd.DataFrame
    soup: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    reading: list[str] = field(default_factory=list)


# -- resolving the inputs ------------------------------------------------------------------
def load_object(ref: str, what: str) -> Any:
    """Return the object ``MODULE:NAME`` names (MODULE dotted and importable from the working folder, or a .py
    file); raise SpecError naming ``what`` (the option) if it cannot be imported."""
    module, sep, name = ref.partition(":")
    if not (sep and module and name):
        raise SpecError(f"{what}={ref!r} is not allowed: expected MODULE:NAME (a dotted module or a .py file)")
    try:
        if module.endswith(".py"):
            path = Path(module)
            if not path.is_file():
                raise FileNotFoundError(f"no such file {module!r}")
            folder = str(path.resolve().parent)
            if folder not in sys.path:  # so that the file imports its sibling modules, wherever lmcbook runs
                sys.path.insert(0, folder)
            spec = importlib.util.spec_from_file_location(path.stem, path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        else:
            if "" not in sys.path and str(Path.cwd()) not in sys.path:
                sys.path.insert(0, str(Path.cwd()))
            mod = importlib.import_module(module)
        return getattr(mod, name)
    except Exception as err:  # an import runs arbitrary code: report whatever it raised
        raise SpecError(f"{what}={ref!r} cannot be imported ({type(err).__name__}: {err}): expected MODULE:NAME "
                        "importable from the working folder, or path/to/file.py:NAME") from err


def model_factory(model: str, args: dict[str, Any], ds: Dataset) -> Callable[[], nn.Module]:
    """Return a function that builds a fresh model: one of lmcbook's (``mlp``, ``vgg11``, ``resnet20``, ``args`` being
    ModelSpec fields), a torchvision classifier (``torchvision:NAME``, weights=None) or ``MODULE:FACTORY(**args)``."""
    if model in ARCHS:
        allowed = [f.name for f in dataclasses.fields(ModelSpec) if f.name != "arch" and (model == "mlp" or
                                                                                          f.name != "depth")]
        unknown = sorted(set(args) - set(allowed))
        if unknown:
            raise SpecError(f"--model-args {unknown} are not allowed for --model {model}: expected some of "
                            f"{', '.join(allowed)} (the hidden units are base_width × width, e.g. "
                            "'{base_width: 64, width: 1}')")
        spec = ModelSpec(arch=model, **{"depth": None if model != "mlp" else 4, **args})
        return lambda: models.build(spec, ds.input_shape, ds.num_classes)
    if model.startswith("torchvision:"):
        try:
            import torchvision
        except ImportError as err:
            raise SpecError(f"--model {model} needs torchvision: pip install 'lmcbook[vision]'") from err
        name = model.partition(":")[2]
        if name not in torchvision.models.list_models(torchvision.models):
            raise SpecError(f"--model {model} is not allowed: torchvision has no classification model {name!r}")
        kw = {"num_classes": ds.num_classes, **args, "weights": None}
        return lambda: torchvision.models.get_model(name, **kw)
    if ":" not in model:
        raise SpecError(f"--model {model!r} is not allowed: expected one of {', '.join(ARCHS)}, torchvision:NAME or "
                        "MODULE:FACTORY")
    factory = load_object(model, "--model")
    if not callable(factory):
        raise SpecError(f"--model {model!r} names a {type(factory).__name__}: expected a class or function")
    return lambda: factory(**args)


#: What ``--preprocess`` may be: each input standardised with the training split's mean and standard deviation (per
#: channel for images), or read as given.
PREPROCESS = ("standardize", "none")


def preprocess_of(name: str, preprocess: str | None) -> str:
    """Return the preprocessing of data ``name``: ``preprocess``, or its default (``standardize`` for lmcbook's data
    sets, as every lmcbook model trains on them; ``none`` for arrays, read as given)."""
    if preprocess is None:
        return "standardize" if name in DATASETS else "none"
    if preprocess not in PREPROCESS:
        raise SpecError(f"--preprocess {preprocess!r} is not allowed: expected one of {', '.join(PREPROCESS)}")
    return preprocess


def preprocess_words(name: str, preprocess: str) -> str:
    """Return the report's sentence on how the inputs were preprocessed."""
    if preprocess == "standardize":
        default = ", the default for lmcbook data sets" if name in DATASETS else ""
        return ("The inputs were standardised with the training split's mean and standard deviation (per channel "
                f"for images; --preprocess standardize{default}). Checkpoints trained on raw inputs need "
                "--preprocess none.")
    return ("The inputs were read as " + ("the data set gives them (pixels in [0, 1] for the image sets; "
                                          "--preprocess none)"
                                          if name in DATASETS else "given (--preprocess none, the default for arrays)")
            + ". Checkpoints trained on standardised inputs need --preprocess standardize.")


def load_data(name: str, root: str | None = None, limit: int | None = None, device: str = "auto",
              preprocess: str | None = None) -> Dataset:
    """Return the data: one of lmcbook's data sets, an .npz (x_train, y_train, x_test, y_test, optionally x_cal, y_cal)
    or ``MODULE:FUNCTION`` returning those arrays as a dict, preprocessed as :func:`preprocess_of` says; at most
    ``limit`` examples per split."""
    standardize = preprocess_of(name, preprocess) == "standardize"
    if name in DATASETS:
        try:
            ds = data.load(name, root, device, standardize=standardize)
        except ImportError as err:  # scikit-learn, mnist1d and torchvision are the [data] extra
            raise SpecError(f"--data {name} needs {err.name or err}: pip install 'lmcbook[data]'") from err
        except DataError as err:  # where the files are missing, diagnose's own advice instead of the book's
            if "needs data_root" not in str(err) and "lacks" not in str(err):
                raise DataError(f"--data {name}: {err}") from None
            said = re.split(r"\s*Pass data_root=PATH|\s*Download them once", str(err))[0].replace("data_root",
                                                                                                 "--data-root")
            tv = data.TORCHVISION_CLASSES.get(name, "MNIST")
            said = re.sub(rf"^dataset={re.escape(repr(name))}:?\s*", "", said).rstrip(". ") + "."
            raise DataError(f"--data {name}: {said} diagnose never downloads: "
                            f"fetch the files once with python -c \"import torchvision; torchvision.datasets.{tv}("
                            f"'PATH', train=True, download=True); torchvision.datasets.{tv}('PATH', train=False, "
                            f"download=True)\", then pass --data-root PATH.") from None
    elif name.endswith(".npz"):
        path = Path(name)
        if not path.is_file():
            raise DataError(f"--data {name!r} is missing: expected an .npz with x_train, y_train, x_test, y_test")
        with np.load(path) as z:
            ds = _arrays_dataset(path.stem, {k: z[k] for k in z.files}, f"--data {name}", device, standardize)
    elif ":" in name:
        arrays = load_object(name, "--data")()
        if not isinstance(arrays, dict):
            raise SpecError(f"--data {name!r} returned a {type(arrays).__name__}: expected a dict of arrays "
                            "x_train, y_train, x_test, y_test (and optionally x_cal, y_cal)")
        ds = _arrays_dataset(name, arrays, f"--data {name}", device, standardize)
    else:
        raise SpecError(f"--data {name!r} is not allowed: expected one of {', '.join(DATASETS)}, a file.npz or "
                        "MODULE:FUNCTION")
    return ds if limit is None else _limited(ds, limit)


def _arrays_dataset(name: str, arrays: dict[str, Any], what: str, device: str, standardize: bool = False) -> Dataset:
    """Return the arrays as a Dataset, as they are (the model reads what it was trained on) or standardised."""
    need = ["x_train", "y_train", "x_test", "y_test"]
    missing = [k for k in need if k not in arrays]
    if missing:
        raise SpecError(f"{what} lacks {missing}: expected arrays {need} (and optionally x_cal, y_cal)")
    if ("x_cal" in arrays) != ("y_cal" in arrays):
        given, lacking = ("x_cal", "y_cal") if "x_cal" in arrays else ("y_cal", "x_cal")
        raise SpecError(f"{what} has {given} but no {lacking}: expected both (a calibration split) or neither (one "
                        f"is held out of the training split)")
    splits = {k: (np.asarray(arrays[f"x_{k}"]), np.asarray(arrays[f"y_{k}"])) for k in ("train", "cal", "test")
              if f"x_{k}" in arrays}
    splits = {k: (x, y.astype(np.int64) if y.dtype == bool else y) for k, (x, y) in splits.items()}
    try:
        finite = [y[np.isfinite(y)] for _, y in splits.values() if np.issubdtype(y.dtype, np.number)]
        finite = [y for y in finite if y.size]
        num_classes = max(2, int(max(np.max(y) for y in finite)) + 1 if finite else 2)
        shape = None
        for split, (x, y) in splits.items():  # as lmcbook's own data sets are checked
            shape = data.check_split(split, x, y, num_classes, shape)
    except SpecError as err:
        raise SpecError(f"{what}: {err}") from None
    (x, y), (xt, yt) = ((a.astype(np.float32), b.astype(np.int64)) for a, b in (splits["train"], splits["test"]))
    if "cal" in splits:
        xc, yc = splits["cal"][0].astype(np.float32), splits["cal"][1].astype(np.int64)
    else:  # held out of the training split, as the book's data sets are
        fit, cal, _ = data.split_indices(len(y), n_cal=max(1, round(CAL_FRACTION * len(y))))
        x, y, xc, yc = x[fit], y[fit], x[cal], y[cal]
    return data.from_arrays(name, x, y, xc, yc, xt, yt, num_classes, device, standardize=standardize)


def _limited(ds: Dataset, limit: int) -> Dataset:
    if limit < 1:
        raise SpecError(f"--limit {limit} is not allowed: expected a number of examples >= 1")
    return Dataset(ds.name, *(t[:limit] for t in (ds.x_train, ds.y_train, ds.x_cal, ds.y_cal, ds.x_test, ds.y_test)),
                   num_classes=ds.num_classes)


def parse_model_args(text: str | None) -> dict[str, Any]:
    """Return ``--model-args`` (YAML mapping) as a dict."""
    if not text:
        return {}
    try:
        args = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise SpecError(f"--model-args {text!r} is not valid YAML ({err})") from err
    if not isinstance(args, dict):
        raise SpecError(f"--model-args {text!r} is not allowed: expected a YAML mapping such as "
                        "'{width: 2, depth: 3}'")
    return args


def prepare(paths: list[str], model: str, data_name: str, model_args: dict[str, Any] | None = None,
            data_root: str | None = None, spec: str | None = None, limit: int | None = None, device: str = "auto",
            lams: int = DEFAULT_LAMS, preprocess: str | None = None) -> Prepared:
    """Return the checked inputs of a diagnosis, or raise SpecError (or DataError) naming what is wrong, before any
    compute: fewer than two checkpoints, a model that cannot be built, checkpoints that do not fit it or are not
    finite, data that the model cannot read or whose classes it does not output, a spec that does not fit."""
    if len(paths) < 2:
        raise SpecError(f"{len(paths)} checkpoint(s) given: expected two or more (CKPT_A CKPT_B [CKPT_C ...])")
    resolved = [Path(p).resolve() for p in paths]
    twice = sorted({p for p, r in zip(paths, resolved) if resolved.count(r) > 1})
    if twice:
        raise SpecError(f"checkpoint {twice[0]!r} is given more than once: expected two or more different "
                        "checkpoints")
    if not 3 <= lams <= 1001:
        raise SpecError(f"--lams {lams} is not allowed: expected a number of λ points in [3, 1001]")
    states = {p: load_state(p) for p in paths}
    preprocess = preprocess_of(data_name, preprocess)
    ds = load_data(data_name, data_root, limit, device, preprocess)
    factory = model_factory(model, model_args or {}, ds)
    try:
        ref = factory()
    except Exception as err:  # the reader's factory: report whatever it raised
        raise SpecError(f"--model {model} with --model-args {model_args or {}} cannot be built "
                        f"({type(err).__name__}: {err})") from err
    if not isinstance(ref, nn.Module):
        raise SpecError(f"--model {model} returned a {type(ref).__name__}: expected a torch.nn.Module")
    try:
        check_states(states, ref.state_dict())
    except CheckpointError as err:
        if model not in ARCHS:
            raise
        raise CheckpointError(f"{err} (lmcbook's {model} is built for the inputs of --data {data_name}, "
                                          f"of shape {tuple(ds.input_shape)}, and its {ds.num_classes} classes)"
                                          ) from err
    nets = [_loaded(factory, s, ds.device) for s in states.values()]
    _check_fit(nets[0], ds, data_name, model)
    user_spec = load_object(spec, "--spec") if spec else None
    if user_spec is not None and not isinstance(user_spec, merge.PermutationSpec):
        raise SpecError(f"--spec {spec} is a {type(user_spec).__name__}: expected an lmcbook.merge.PermutationSpec")
    grid = tuple(float(v) for v in np.round(np.linspace(0, 1, lams), 10))
    found, note = _find_spec(nets[0], ds, user_spec, spec)
    kept = unpermuted_layers(nets[0], found, ds.x_test[:1]) if user_spec is not None else []
    if kept:
        note += (f" It is a partial spec: it leaves the output units of {', '.join(kept)} in their order, so the "
                 "matched merge says what permuting the others does, not whether the gap is a permutation problem.")
    return Prepared(list(paths), nets, factory, ds, model, data_name, found, note, grid, kept,
                    preprocess_words(data_name, preprocess))


def unpermuted_layers(net: nn.Module, spec: merge.PermutationSpec, x: torch.Tensor) -> list[str]:
    """Return the hidden linear and convolution layers of ``net`` (in call order) whose output units ``spec`` leaves
    in their order."""
    hidden = [p.name for p in models.probe_points(net, x) if p.role == "hidden"]
    return [name for name in hidden
            if merge.axis_perm((spec.axes_to_perm.get(f"{name}.weight") or (None,))[0])[0] is None]


def compatibility(paths: list[str], model: str, data_name: str, model_args: dict[str, Any] | None = None,
                  data_root: str | None = None, spec: str | None = None, device: str = "auto",
                  preprocess: str | None = None) -> tuple[bool, list[str]]:
    """Return whether the checkpoints can be merged and what the full report would run, in sentences, from the
    state dicts and the model alone (``lmcbook diagnose --check``: no interpolation, no probe): whether each
    checkpoint fits the model (one architecture), whether a permutation spec is found, whether BatchNorm statistics
    must be recomputed, and which merges the report runs."""
    lines, fits = [], True
    ds = load_data(data_name, data_root, 2, device, preprocess)  # two examples: the input shape and the classes
    ref = model_factory(model, model_args or {}, ds)().state_dict()
    for p in paths:
        try:
            state = load_state(p)
            check_states({p: state}, ref)
            lines.append(f"{p}: fits --model {model} ({len(state)} tensors).")
        except CheckpointError as err:
            fits = False
            lines.append(f"{err}.")
    if not fits:
        return False, lines + ["The checkpoints do not all share the model's architecture: no merge can run."]
    prep = prepare(paths, model, data_name, model_args, data_root, spec, CHECK_EXAMPLES, device, 3, preprocess)
    bn = models.has_batchnorm(prep.models[0])
    lines += [prep.spec_note, "BatchNorm statistics must be recomputed for every merged model (the report does, on "
              "the training split)." if bn else "No BatchNorm: merged models need no recomputed statistics."]
    merges = ["the plain average along the λ grid, for every pair"]
    if prep.spec is not None:
        merges.append("the same after weight matching" + (" and REPAIR" if repair_applies(prep.models[0]) else ""))
    if len(paths) >= 3:
        merges.append("the uniform soup of all " + str(len(paths)) + (" (plain and after matching)" if prep.spec
                                                                         else " (plain)"))
    return True, lines + [f"The report will run {'; '.join(merges)}."]


def _loaded(factory: Callable[[], nn.Module], state: dict[str, torch.Tensor], device: torch.device) -> nn.Module:
    net = factory()
    net.load_state_dict(state)
    return net.to(device).eval().requires_grad_(False)


def _check_fit(net: nn.Module, ds: Dataset, data_name: str, model: str) -> None:
    """Raise SpecError unless the model reads the data's inputs and outputs at least its number of classes."""
    try:
        out = models.logits(net, ds.x_test[:2])
    except Exception as err:  # a shape mismatch surfaces as whatever the first layer raises
        raise SpecError(f"--data {data_name} (inputs of shape {tuple(ds.input_shape)}) does not fit --model {model}: "
                        f"{type(err).__name__}: {err}") from err
    if out.ndim != 2 or out.shape[1] < ds.num_classes:
        raise SpecError(f"--model {model} outputs shape {tuple(out.shape[1:])} but --data {data_name} has "
                        f"{ds.num_classes} classes: expected one logit per class")


def _find_spec(net: nn.Module, ds: Dataset, user: merge.PermutationSpec | None,
               ref: str | None) -> tuple[merge.PermutationSpec | None, str]:
    """Return the spec to match with and a sentence on where it came from (None where there is none)."""
    x = ds.x_test[:8]
    if user is not None:
        check_spec(net, user, x, tol=SPEC_TOL)
        return user, f"The permutation spec is --spec {ref}; a random permutation of it left the outputs unchanged."
    try:
        spec = derive_spec(net, x)
        err = check_spec(net, spec, x, tol=SPEC_TOL)
    except SpecUnavailable as why:
        return None, f"No permutation spec could be derived, so the weight-matched merge is skipped: {why}"
    return spec, (f"The permutation spec was derived by tracing the network with torch.fx ({len(spec.sizes)} "
                  f"permutations); a random permutation of it changed the outputs by {err:.1e} (relative), which is "
                  "rounding.")


# -- measuring -----------------------------------------------------------------------------
def depth(net: nn.Module, x: torch.Tensor) -> int:
    """Return L, the number of linear/conv layers the probes number (in call order, shortcuts included)."""
    return sum(p.layer is not None for p in models.probe_points(net, x))


def diagnose(prep: Prepared, progress: bool | None = None) -> Diagnosis:
    """Return every measurement of the report on the prepared checkpoints (with a progress bar on a terminal or in a
    notebook, unless ``progress`` or $LMCBOOK_PROGRESS says otherwise)."""
    ds, nets = prep.data, prep.models
    L = depth(nets[0], ds.x_test[:1])
    pairs = list(itertools.combinations(range(len(nets)), 2))
    untrained = [_untrained(prep, s) for s in UNTRAINED_SEEDS]
    bar = tqdm(total=len(pairs) * 3 + 1, desc="diagnose", unit="step", disable=not show_progress(progress))
    rows, curves, layers, theory = [], [], [], []
    caveats = probes.scale_caveats(nets[0])
    x_probe = ds.x_test[:PROBE_EXAMPLES]
    base = _layer_probe(*untrained, x_probe, ds, "untrained", "baseline")
    for i, j in pairs:
        name = f"{i + 1}-{j + 1}"
        for method, b in _methods(prep, nets[i], nets[j]):
            curve, summ = merge.pair_summary(nets[i], b, ds, prep.lams)
            rows.append({"pair": name, "method": method, **summ, **_repair(prep, nets[i], b, method)})
            curves.append(curve.assign(pair=name, method=method))
            bar.update(1)
        acts = _layer_probe(nets[i], nets[j], x_probe, ds, "trained", name, keep=True)
        layers += [acts[0], base[0].assign(pair=name)]
        if not caveats["norm"]:
            theory += [acts[1].weak_additivity().assign(pair=name),
                       acts[1].reciprocal_orthogonality().assign(pair=name)]
        bar.update(1)
    ranks = pd.concat([probes.rank_profile(n, ds.x_test[:1]).assign(checkpoint=k + 1) for k, n in enumerate(nets)])
    soup = soup_summary(nets, ds, L, prep.spec) if len(nets) >= 3 else {}
    bar.update(1)
    bar.close()
    diag = Diagnosis(prep, L, pd.DataFrame(rows), pd.concat(curves, ignore_index=True),
                     pd.concat(layers, ignore_index=True),
                     pd.concat(theory, ignore_index=True) if theory else pd.DataFrame(), ranks, soup)
    diag.notes = notes(diag, caveats)
    diag.reading = reading(diag)
    return diag


def _untrained(prep: Prepared, seed: int) -> nn.Module:
    """Return a freshly initialised model (BatchNorm statistics computed on the training split, as training would)."""
    torch.manual_seed(seed)
    net = prep.factory().to(prep.data.device)
    if models.has_batchnorm(net):
        merge.reset_bn(net, prep.data.x_train)
    return net.eval().requires_grad_(False)


def _methods(prep: Prepared, a: nn.Module, b: nn.Module) -> list[tuple[str, nn.Module]]:
    """Return (method, model b as merged with a): b itself, and b permuted by weight matching if there is a spec."""
    out = [("none", b)]
    if prep.spec is not None:
        match = merge.weight_matching(a, b, prep.spec)
        out.append(("weight_matching", merge.permute(b, match.perms, prep.spec)))
    return out


def repair_applies(net: nn.Module) -> bool:
    """Return True if REPAIR's correction points are known: no BatchNorm, or a norm found after every hidden layer."""
    if not models.has_batchnorm(net):
        return True
    mods = dict(net.named_modules())
    return all(isinstance(mods[p], probes.NORM_TYPES) for p in merge.repair_points(net))


def _repair(prep: Prepared, a: nn.Module, b: nn.Module, method: str) -> dict[str, float]:
    """Return the merged model's test accuracy at λ = ½ after REPAIR (NaN where REPAIR does not apply)."""
    if method != "weight_matching" or not repair_applies(a):
        return {"acc_repair": float("nan")}
    merged = merge.interpolate(a, b, 0.5, prep.data)
    fixed = merge.repair(merged, a, b, prep.data, 0.5)
    return {"acc_repair": models.evaluate(fixed, prep.data.x_test, prep.data.y_test).acc}


def _layer_probe(a: nn.Module, b: nn.Module, x: torch.Tensor, ds: Dataset, kind: str, pair: str,
                 keep: bool = False) -> tuple[pd.DataFrame, probes.PairActivations | None]:
    """Return the LEWC/LLFC errors per layer at λ = ½ of one pair (and its activations if ``keep``)."""
    acts = probes.PairActivations(a, b, x, ds.x_train, dtype=torch.float32, warn=False)
    return acts.lewc([0.5]).assign(model=kind, pair=pair), acts if keep else None


def soup_summary(nets: list[nn.Module], ds: Dataset, L: int,
                 spec: merge.PermutationSpec | None = None) -> dict[str, float]:
    """Return the uniform soup of K models against the K-model logit ensemble and the best single model, and the
    logit scale ‖f(soup)‖ / ‖mean_k f_k‖, which the K-model form of LEWC predicts to be K^(1−L); with a ``spec``,
    also the soup after weight matching every model to the first (git-re-basin's one-to-many matching)."""
    z = [torch.cat([models.logits(n, ds.x_test), models.logits(n, ds.x_cal)]) for n in nets]
    n_test = len(ds.x_test)
    ens = torch.stack(z).mean(0)
    soups = {"": merge.uniform_soup(nets, ds)}
    if spec is not None:
        soups["_matched"] = merge.uniform_soup(
            [nets[0]] + [merge.permute(n, merge.weight_matching(nets[0], n, spec).perms, spec) for n in nets[1:]], ds)
    e = merge.logit_summary(ens[:n_test], ens[n_test:], ds)
    singles = [models.evaluate_logits(t[:n_test], ds.y_test).acc for t in z]
    K = len(nets)
    out = {"K": K}
    for tag, soup in soups.items():
        z_soup = torch.cat([models.logits(soup, ds.x_test), models.logits(soup, ds.x_cal)])
        s = merge.logit_summary(z_soup[:n_test], z_soup[n_test:], ds)
        out |= {f"acc_soup{tag}": s["acc"], f"loss_cal_soup{tag}": s["loss_cal"]}
        if not tag:
            out["soup_logit_scale"] = s["logit_norm"] / e["logit_norm"]
    return {**out, "acc_ensemble_K": e["acc"], "acc_best_single": max(singles), "loss_cal_ensemble_K": e["loss_cal"],
            "soup_logit_scale_lewc": float(K) ** (1 - L)}


# -- what it means -------------------------------------------------------------------------
def notes(diag: Diagnosis, caveats: dict[str, list[str]]) -> list[str]:
    """Return the plain statements of what the theory's numbers mean for this network."""
    out = [diag.prepared.preprocess, diag.prepared.spec_note]
    if caveats["bias"] or caveats["norm"]:
        parts = [f"{len(v)} {k} layer(s)" for k, v in (("biased", caveats["bias"]),
                                                       ("normalisation", caveats["norm"])) if v]
        out.append(f"LEWC's λ^l scale assumes bias-free networks without normalisation; this one has "
                   f"{' and '.join(parts)}, so its LEWC numbers and the 2^(1−L) prediction are approximate: compare "
                   "LEWC with LLFC and with the untrained pair.")
    if caveats["norm"]:
        out.append("Weak additivity and reciprocal orthogonality are not reported: a normalisation layer between "
                   "layers breaks the assumption that a layer's output feeds the next ReLU directly.")
    at_bound = diag.curves["tau_at_bound"].astype(bool)
    if at_bound.any():
        out.append(f"{int(at_bound.sum())} of {len(at_bound)} temperature fits on the interpolation curves ended at "
                   "a bound of τ (the calibration split is perfectly separated, or nearly): the calibrated losses of "
                   "those models are unreliable; a larger calibration split helps.")
    if not repair_applies(diag.prepared.models[0]):
        out.append("REPAIR is not reported: lmcbook cannot find the normalisation layer after each hidden layer of "
                   "this network; the BatchNorm reset already recomputes each channel's statistics.")
    if diag.prepared.spec is not None and _residual(diag.prepared.spec):
        out.append(f"L = {diag.depth} counts every linear/conv layer in call order, shortcuts included; the LEWC "
                   "theorem does not cover residual streams, so 2^(1−L) is only a reference line.")
    return out


def _residual(spec: merge.PermutationSpec) -> bool:
    """Return True if two layers write to the same permuted units (a residual addition joined them)."""
    outs = [ax[0] for k, ax in spec.axes_to_perm.items() if k.endswith("weight") and len(ax) >= 2 and ax[0]]
    return len(outs) != len(set(outs))


def accuracy_half_width(acc: float, n: int) -> float:
    """Return the half-width of the 95% Wilson interval of a test accuracy ``acc`` measured on ``n`` examples."""
    from scipy.stats import binomtest

    ci = binomtest(int(round(acc * n)), n).proportion_ci(0.95, method="wilson")
    return (ci.high - ci.low) / 2


def endpoint_floor(classes: int) -> float:
    """Return the test accuracy every endpoint needs before the reading speaks: chance plus the larger of 10 points
    and chance again, but no more than halfway from chance to perfect (20% for 10 classes, 75% for 2)."""
    chance = 1 / classes
    return chance + max(ABOVE_CHANCE_POINTS, min(chance, (1 - chance) / 2))


def input_problems(diag: Diagnosis) -> list[str]:
    """Return what keeps the numbers from being read (none: the reading may speak): a number that is not finite,
    endpoints that do not score well above chance (inputs preprocessed otherwise than in training, labels of
    another order, untrained models), a test split too small for the differences the reading states."""
    ds, plain = diag.prepared.data, diag.pairs[diag.pairs["method"] == "none"]
    numbers = plain.select_dtypes("number").drop(columns=["acc_repair"], errors="ignore")  # NaN: no REPAIR here
    out = []
    if not np.isfinite(numbers.to_numpy(dtype=float)).all() or not np.isfinite(
            diag.curves.select_dtypes("number").drop(columns=["acc_repair"], errors="ignore").to_numpy(float)).all():
        bad = sorted(c for c in numbers if not np.isfinite(numbers[c].to_numpy(float)).all())
        out.append(f"some numbers are not finite (NaN or infinite: {', '.join(bad) or 'on the interpolation curves'}): "
                   "check the inputs for NaN or infinite values and the checkpoints for diverged weights")
    chance, floor = 1 / ds.num_classes, endpoint_floor(ds.num_classes)
    ends = sorted({float(v) for v in pd.concat([plain["acc_a"], plain["acc_b"]]) if np.isfinite(v)})
    if ends and ends[0] < floor:
        out.append(f"the endpoints score {', '.join(f'{v:.0%}' for v in ends[:4])} on the test split, not well above "
                   f"chance ({chance:.0%} for {ds.num_classes} classes; the reading needs {floor:.0%}): check the "
                   "inputs' preprocessing (scale, standardisation, dtype) and that the labels are "
                   "the classes the models were trained on")
    n = len(ds.y_test)
    merged = float(plain["acc_merged"].mean()) if np.isfinite(plain["acc_merged"]).all() else 0.5
    width = accuracy_half_width(merged, n)
    if width > MAX_ACC_HALF_WIDTH:
        out.append(f"the test split holds {n} examples, so an accuracy of {merged:.2f} is known only to ±{width:.2f} "
                   f"(95% Wilson interval), wider than the ±{MAX_ACC_HALF_WIDTH} the reading needs: use a larger "
                   "test split (a larger --limit, or none)")
    return out


def _matched_sentence(diag: Diagnosis, acc_gap: float) -> list[str]:
    """Return the reading's sentence on weight matching: how much of the accuracy gap it closes (none where the gap
    is small or there is no spec; no verdict for a partial spec)."""
    out: list[str] = []
    matched = diag.pairs[diag.pairs["method"] == "weight_matching"]
    if len(matched) and acc_gap >= SMALL_ACC_BARRIER and diag.prepared.unpermuted:
        out.append(f"After weight matching with the partial --spec the accuracy barrier is "
                   f"{matched['acc_barrier'].mean():.3f}; a spec that leaves "
                   f"{', '.join(diag.prepared.unpermuted)} in their order cannot tell whether the gap is a "
                   "permutation problem, so no verdict is drawn.")
    elif len(matched) and acc_gap >= SMALL_ACC_BARRIER:
        closed = 1 - matched["acc_barrier"].mean() / acc_gap
        verdict = ("weight matching closes most of the gap: a permutation problem" if closed > CLOSED_SHARE else
                   "weight matching closes little of the gap: not only a permutation problem")
        out.append(f"After weight matching the accuracy barrier is {matched['acc_barrier'].mean():.3f} "
                   f"({closed:.0%} of it closed): {verdict}.")
    return out


def reading(diag: Diagnosis) -> list[str]:
    """Return the generated reading of the summary: one sentence per finding, each from a named threshold; or, where
    the inputs allow no reading (:func:`input_problems`), what is wrong and no verdict."""
    problems = input_problems(diag)
    if problems:
        return [f"No reading is given: {p}." for p in problems]
    plain = diag.pairs[diag.pairs["method"] == "none"]
    n = len(diag.prepared.data.y_test)
    out = [f"Test accuracies are read on {n} examples: the merged model's "
           f"({plain['acc_merged'].mean():.3f}) is known to ±{accuracy_half_width(plain['acc_merged'].mean(), n):.3f} "
           "(95% Wilson interval)."]
    if len(plain) > 1:
        out.append(f"The numbers in these sentences are means over the {len(plain)} pairs.")
    raw, cal = plain["loss_barrier_mid"].mean(), plain["loss_barrier_cal_mid"].mean()
    acc_gap = plain["acc_barrier"].mean()
    if acc_gap < SMALL_ACC_BARRIER:
        out.append(f"The accuracy barrier is small ({acc_gap:.3f} < {SMALL_ACC_BARRIER}): plain averaging merges "
                   "these checkpoints.")
    else:
        out.append(f"Plain averaging loses accuracy: the accuracy barrier is {acc_gap:.3f}.")
    bound = diag.curves[diag.curves["method"] == "none"]["tau_at_bound"].astype(bool)
    if bound.any():
        out.append(f"{int(bound.sum())} of the plain merges' {len(bound)} temperature fits ended at a bound, so the "
                   f"calibrated barrier ({cal:.3f} nats at the midpoint) cannot be read; the raw one is {raw:.3f}.")
    elif raw > 0 and cal < TEMPERATURE_SHARE * raw:
        out.append(f"The calibrated midpoint loss barrier ({cal:.3f} nats) is less than {TEMPERATURE_SHARE:.0%} of "
                   f"the raw one ({raw:.3f}): most of the raw barrier is a temperature effect.")
    else:
        out.append(f"Calibration does not remove the midpoint loss barrier ({raw:.3f} nats raw, {cal:.3f} "
                   "calibrated): it is not only a temperature effect.")
    out += _matched_sentence(diag, acc_gap)
    ratio, pred = plain["logit_norm_ratio"].mean(), 2.0 ** (1 - diag.depth)
    out.append(f"The merged model's logits are {ratio:.3f} of the ensemble's in norm; LEWC predicts "
               f"2^(1−L) = {pred:.3g} for L = {diag.depth}" + (" (close: within a factor of 2)."
                                                             if abs(math.log2(ratio / pred)) < 1 else "."))
    lw = diag.layers[(diag.layers["metric"] == "lewc_rel_err") & (diag.layers["layer"] > 1)]
    trained, base = (lw[lw["model"] == k]["value"].mean() for k in ("trained", "untrained"))
    verdict = ("LEWC describes the trained pair better than an untrained one." if trained < LEWC_BETTER * base
               else "LEWC describes it about as well as, or worse than, an untrained pair.")
    out.append(f"LEWC's mean relative error over layers 2 to L is {trained:.3f} for these checkpoints against "
               f"{base:.3f} for an untrained pair: {verdict}")
    if diag.soup:
        s = diag.soup
        drop = s["acc_best_single"] - s["acc_soup"]
        out.append(f"The uniform soup of all {s['K']} reaches {s['acc_soup']:.3f} against {s['acc_ensemble_K']:.3f} "
                   f"for their logit ensemble and {s['acc_best_single']:.3f} for the best single model"
                   + (f": it drops {drop:.3f} below the best single model" if drop > SOUP_DROP else "")
                   + (f"; after weight matching every model to the first it reaches {s['acc_soup_matched']:.3f}."
                      if "acc_soup_matched" in s else "."))
    return out


def summary_table(diag: Diagnosis) -> pd.DataFrame:
    """Return the report's opening table: one row per pair and merge method, the numbers that matter."""
    cols = {"acc_a": "acc a", "acc_b": "acc b", "acc_merged": "merged acc (λ=½)", "acc_ensemble": "ensemble acc",
            "acc_barrier": "acc barrier", "loss_barrier": "loss barrier (raw)",
            "loss_barrier_cal": "loss barrier (calibrated)", "logit_norm_ratio": "logit norm ratio",
            "acc_repair": "REPAIR acc (λ=½)"}
    t = diag.pairs.set_index(["pair", "method"])[list(cols)].rename(columns=cols)
    return t.dropna(axis=1, how="all")


def long_frame(diag: Diagnosis) -> pd.DataFrame:
    """Return every number of the report as one long frame: section, pair, method, model, lam, layer, metric, value."""
    summ = diag.pairs.melt(id_vars=["pair", "method"], var_name="metric").assign(section="pair")
    curve = diag.curves.melt(id_vars=["pair", "method", "lam"], var_name="metric").assign(section="curve")
    layers = diag.layers[["pair", "model", "layer", "lam", "metric", "value"]].assign(section="layers")
    parts = [summ, curve, layers,
             diag.ranks[diag.ranks["metric"] != "singular_value"][["checkpoint", "layer", "metric", "value"]]
             .assign(section="rank")]
    if len(diag.theory):
        parts.append(diag.theory[["pair", "layer", "lam", "metric", "value"]].assign(section="theory"))
    if diag.soup:
        parts.append(pd.DataFrame({"metric": list(diag.soup), "value": list(diag.soup.values())}).assign(
            section="soup"))
    out = pd.concat(parts, ignore_index=True)
    out["value"] = pd.to_numeric(out["value"], errors="coerce")
    cols = ["section", "pair", "method", "model", "checkpoint", "lam", "layer", "metric", "value"]
    return out.reindex(columns=cols)


# ---- Reading checkpoints ----
# Reading a reader's own checkpoints safely: safetensors, or a PyTorch state dict read with ``weights_only=True``.
#
# A state dict may be nested under a key (``"state_dict"``, ``"model"``, as training
# frameworks save it) and carry DataParallel's ``module.`` prefix; both are undone.
# Nothing is unpickled beyond tensors and plain containers.

#: Keys under which training frameworks nest the model's state dict, tried in this order.
NESTED_KEYS = ("state_dict", "model_state_dict", "model_state", "model", "module", "net")
PREFIXES = ("module.", "_orig_mod.")  #: prefixes of DataParallel and torch.compile, stripped from every key
SHOWN = 5  #: how many differing keys an error lists


class CheckpointError(SpecError):
    """A checkpoint is missing, unreadable, or does not fit the model: the message names the file."""


def load_state(path: str | Path) -> dict[str, torch.Tensor]:
    """Return the state dict in ``path`` (``.safetensors``, else ``torch.load(weights_only=True)``) on the CPU."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {str(path)!r} is missing: expected a .safetensors file or a PyTorch "
                              "state dict (.pt, .pth, .bin)")
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            raw: object = load_file(str(path), device="cpu")
        else:
            raw = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:  # weights_only refuses a pickled object (a whole nn.Module, say)
        raise CheckpointError(
            f"checkpoint {str(path)!r} holds pickled Python objects (a whole model saved with torch.save(model), "
            "perhaps), which lmcbook never unpickles: convert it once, where you trust the file, with python -c "
            f"\"import torch; m = torch.load({str(path)!r}, map_location='cpu', weights_only=False); "
            f"torch.save(m.state_dict(), {str(path.with_suffix('')) + '_state.pt'!r})\"") from None
    except Exception as err:  # safetensors and torch.load raise many types on a bad file
        first = re.sub(r"\x1b\[[0-9;]*m", "", str(err)).strip().splitlines()[0] if str(err).strip() else ""
        raise CheckpointError(f"checkpoint {str(path)!r} cannot be read ({type(err).__name__}: {first}); expected "
                              "safetensors or a state dict saved with torch.save(model.state_dict(), ...)") from None
    return _unwrap(raw, path)


def _unwrap(raw: object, path: Path) -> dict[str, torch.Tensor]:
    """Return the tensors of a (possibly nested, possibly ``module.``-prefixed) state dict."""
    while isinstance(raw, Mapping) and not any(isinstance(v, torch.Tensor) for v in raw.values()):
        key = next((k for k in NESTED_KEYS if isinstance(raw.get(k), Mapping)), None)
        if key is None:
            raise CheckpointError(f"checkpoint {str(path)!r} holds no tensors at its top level and none of the keys "
                                  f"{list(NESTED_KEYS)} (it has {sorted(map(str, raw))[:SHOWN]}): expected a state "
                                  "dict")
        raw = raw[key]
    if not isinstance(raw, Mapping):
        raise CheckpointError(f"checkpoint {str(path)!r} holds a {type(raw).__name__}: expected a state dict")
    state = {}
    for key, value in raw.items():
        if isinstance(value, torch.Tensor):
            for prefix in PREFIXES:
                key = key.removeprefix(prefix)
            state[key] = value
    return state


def check_states(states: dict[str, dict[str, torch.Tensor]], reference: dict[str, torch.Tensor]) -> None:
    """Raise :class:`CheckpointError` naming the file unless every state has ``reference``'s keys and shapes (the
    model's own state dict) and finite floating-point values."""
    for path, state in states.items():
        missing = [k for k in reference if k not in state]
        extra = [k for k in state if k not in reference]
        if missing or extra:
            raise CheckpointError(f"checkpoint {path!r} does not fit the model: missing keys {missing[:SHOWN]}"
                                  f"{' …' if len(missing) > SHOWN else ''}, unexpected keys {extra[:SHOWN]}"
                                  f"{' …' if len(extra) > SHOWN else ''} ({len(missing)} and {len(extra)} in all)")
        shapes = [f"{k}: {tuple(state[k].shape)} vs the model's {tuple(v.shape)}" for k, v in reference.items()
                  if state[k].shape != v.shape]
        if shapes:
            raise CheckpointError(f"checkpoint {path!r} does not fit the model: {len(shapes)} shape(s) differ, "
                                  f"first {'; '.join(shapes[:SHOWN])}")
        bad = [k for k, v in state.items() if v.is_floating_point() and not torch.isfinite(v).all()]
        if bad:
            raise CheckpointError(f"checkpoint {path!r} has non-finite (NaN or inf) weights in {bad[:SHOWN]}: "
                                  "expected a model that trained without diverging")


# ---- The report ----
# The diagnose report: one self-contained HTML page (figures inlined as PNG), its CSV and a JSON summary.
#
# The three files are written into a fresh temporary folder beside the output folder,
# which then replaces the output folder in one rename: a report is never half-written.

FILES = ("report.html", "report.csv", "summary.json")  #: what a report folder holds

#: What each number of the summary table means (the report prints this beside it).
MEANINGS = {
    "acc a": "test accuracy of the pair's first checkpoint (λ = 1)",
    "acc b": "test accuracy of the second checkpoint (λ = 0); after weight matching, the permuted second checkpoint",
    "merged acc (λ=½)": "test accuracy of the weight average θ(½) (BatchNorm statistics recomputed on training data)",
    "ensemble acc": "test accuracy of the logit ensemble ½(f_a + f_b), the reference a merge aims at",
    "acc barrier": "max over λ of the linear interpolation of the endpoints' accuracies minus θ(λ)'s",
    "loss barrier (raw)": "max over λ of θ(λ)'s test loss minus the endpoints' interpolated loss (nats)",
    "loss barrier (calibrated)": "the same with every model's own inverse temperature, fitted on the calibration split",
    "logit norm ratio": "‖f(θ(½))‖ / ‖½(f_a + f_b)‖ on the test split; exact LEWC predicts 2^(1−L)",
    "REPAIR acc (λ=½)": "merged accuracy after weight matching and REPAIR (each hidden channel's mean and std reset "
                        "to the endpoints' interpolated statistics)",
}


#: The report's by-layer, theory, rank and soup columns in words, with what each means (the tables show the words and,
#: under each table, the meanings of its columns; report.csv keeps the names).
COLUMNS = {
    "lewc_rel_err": ("LEWC error", "‖f_l(θ(½)) − (½^l f_l^a + ½^l f_l^b)‖ / ‖f_l(θ(½))‖ over the probed inputs"),
    "lewc_cos": ("LEWC cosine", "mean cosine, per input, of f_l(θ(½)) and LEWC's prediction"),
    "lewc_n_excluded": ("LEWC inputs left out", "inputs where either vector is zero (no cosine)"),
    "llfc_rel_err": ("LLFC error", "the same against LLFC's prediction ½ f_l^a + ½ f_l^b"),
    "llfc_cos": ("LLFC cosine", "mean cosine, per input, of f_l(θ(½)) and LLFC's prediction"),
    "llfc_n_excluded": ("LLFC inputs left out", "inputs where either vector is zero (no cosine)"),
    "additivity_rel_err": ("additivity error", "‖σ(u + v) − σ(u) − σ(v)‖ / ‖σ(u) + σ(v)‖, u and v the two terms "
                           "of θ(½)'s pre-activation (weak additivity of ReLU)"),
    "additivity_cos": ("additivity cosine", "mean cosine of σ(u + v) and σ(u) + σ(v)"),
    "additivity_n_excluded": ("additivity inputs left out", "inputs where either vector is zero"),
    "sign_conflict": ("sign conflicts", "share of units where u and v have opposite signs"),
    "baseline_additivity_rel_err": ("additivity error, Gaussian baseline", "the same for independent Gaussian u "
                                    "and v of the same scales: what no structure gives"),
    "baseline_additivity_cos": ("additivity cosine, Gaussian baseline", "the cosine for that baseline"),
    "baseline_additivity_n_excluded": ("baseline inputs left out", "inputs the baseline's cosine left out"),
    "baseline_sign_conflict": ("sign conflicts, Gaussian baseline", "the sign-conflict share for that baseline"),
    "orth_ratio_ab": ("‖W_a z_b‖ / ‖W_a z_a‖", "reciprocal orthogonality: near 0 when a's weights ignore b's "
                      "features"),
    "orth_ratio_ba": ("‖W_b z_a‖ / ‖W_b z_b‖", "the same with a and b exchanged"),
    "orth_ratio": ("orthogonality ratio", "the mean of the two ratios"),
    "commutativity_rel_err": ("commutativity error", "‖(W_a − W_b)(z_a − z_b)‖ / (‖W_a z_a‖ + ‖W_b z_b‖), Zhou et "
                              "al.'s condition"),
    "cross_cos": ("cross terms: cosine", "cosine of θ(½)'s layer output with the cross terms W_a z_b, W_b z_a "
                  "and without them"),
    "cross_rel_err": ("cross terms: error", "relative change that dropping the cross terms makes"),
    "cross_n_excluded": ("cross terms: inputs left out", "inputs where either vector is zero"),
    "effective_rank": ("effective rank", "exp of the entropy of the normalised singular values of W"),
    "stable_rank": ("stable rank", "‖W‖_F² / ‖W‖_2²"),
    "rel_effective_rank": ("effective rank / size", "the effective rank over min(rows, columns)"),
    "K": ("K", "models in the soup"),
    "acc_soup": ("soup accuracy", "test accuracy of the uniform average of the K models"),
    "acc_soup_matched": ("matched soup accuracy", "the same after weight matching every model to the first"),
    "acc_ensemble_K": ("K-ensemble accuracy", "test accuracy of the mean of the K models' logits"),
    "acc_best_single": ("best single accuracy", "the best of the K models alone"),
    "loss_cal_soup": ("soup calibrated loss", "test loss of the soup at its own fitted temperature (nats)"),
    "loss_cal_soup_matched": ("matched soup calibrated loss", "the same for the matched soup"),
    "loss_cal_ensemble_K": ("K-ensemble calibrated loss", "test loss of the K-ensemble at its fitted temperature"),
    "soup_logit_scale": ("soup logit scale", "‖f(soup)‖ / ‖mean_k f_k‖ on the test split"),
    "soup_logit_scale_lewc": ("K^(1−L)", "the K-model form of LEWC's prediction of that scale"),
}


def _worded(df: pd.DataFrame, cls: str) -> str:
    """Return a table with its columns in words (:data:`COLUMNS`) and, under it, a line per column on its meaning."""
    shown = df.rename(columns={k: v[0] for k, v in COLUMNS.items()})
    said = "".join(f"<li><b>{html.escape(COLUMNS[c][0])}</b>: {html.escape(COLUMNS[c][1])}</li>"
                   for c in df.columns if c in COLUMNS)
    return (f'<div class="wide">{_table(shown, cls)}</div>'
            + (f'<ul class="columns">{said}</ul>' if said else ""))


def check_out(out: str | Path) -> Path:
    """Return the output folder, refusing (before any compute) one that exists and is not a diagnose report, or
    whose parent folder is missing."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or not set(p.name for p in out.iterdir()) <= set(FILES)):
        raise SpecError(f"--out {str(out)!r} is not allowed: it exists and is not an earlier diagnose report "
                        f"(which holds only {', '.join(FILES)}); expected a new folder or an earlier report")
    parent = out.absolute().parent
    if not parent.is_dir():
        raise SpecError(f"--out {str(out)!r} is not allowed: its parent folder does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise SpecError(f"--out {str(out)!r} is not allowed: its parent folder {str(parent)!r} cannot be written")
    return out


def _leftovers(out: Path) -> list[Path]:
    """Return the temporary folders that earlier writes of report ``out`` left behind when they were killed (their
    process no longer runs, and they hold only a report's files): ``.OUT.PID.*`` and ``.OUT.old-PID``."""
    found = []
    if os.name != "posix":  # os.kill(pid, 0) is a liveness probe only there
        return found
    for p in out.absolute().parent.glob(f".{out.name}.*"):
        m = re.fullmatch(rf"\.{re.escape(out.name)}\.(?:old-)?(\d+)(?:\..*)?", p.name)
        if m and p.is_dir() and {q.name for q in p.iterdir()} <= set(FILES) and not _running(int(m.group(1))):
            found.append(p)  # only a report's files: a folder of the reader's with a name like it stays
    return found


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def write(diag: Diagnosis, out: str | Path, command: str, seconds: float) -> Path:
    """Write report.html, report.csv and summary.json into ``out`` at once; return the path of report.html."""
    out = check_out(out)
    for old in _leftovers(out):
        shutil.rmtree(old, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.{os.getpid()}.", dir=out.absolute().parent))
    mask = os.umask(0)
    os.umask(mask)
    tmp.chmod(0o777 & ~mask)  # mkdtemp's 0700 would keep the report from everyone else
    try:
        long_frame(diag).to_csv(tmp / "report.csv", index=False)
        (tmp / "summary.json").write_text(json.dumps(strict_json(summary(diag, command, seconds)), indent=1,
                                                     allow_nan=False))
        (tmp / "report.html").write_text(render(diag, command, seconds))
        old = None
        if out.exists():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            os.replace(out, old)
        os.replace(tmp, out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out / "report.html"


def strict_json(obj: Any) -> Any:
    """Return ``obj`` with every number as a plain float or int and every NaN or infinity as None (JSON's null)."""
    if isinstance(obj, dict):
        return {str(k): strict_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict_json(v) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    return obj


def summary(diag: Diagnosis, command: str, seconds: float) -> dict:
    """Return the JSON summary: inputs, L, every pair's numbers, the soup, the reading and the notes."""
    p = diag.prepared
    return {"command": command, "lmcbook": __version__, "seconds": round(seconds, 1),
            "checkpoints": p.paths, "model": p.model_name, "data": p.data_name, "sizes": p.data.sizes(),
            "lams": len(p.lams), "depth_L": diag.depth, "spec": p.spec_note,
            "pairs": diag.pairs.to_dict(orient="records"), "soup": diag.soup, "reading": diag.reading,
            "notes": diag.notes}


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    plt.close(fig)
    return f'<img alt="figure" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def number(v: float) -> str:
    """Return a number of the report with 4 significant digits; one that rounds to zero prints as 0, never -0."""
    text = f"{v:.4g}"
    return "0" if text.lstrip("-") in ("0", "0.0") else text


def _table(df: pd.DataFrame, cls: str) -> str:
    return df.to_html(classes=cls, float_format=number, na_rep="–", border=0)


def _list(items: list[str], cls: str) -> str:
    return f'<ul class="{cls}">' + "".join(f"<li>{html.escape(s)}</li>" for s in items) + "</ul>"


STYLE = """body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
table{border-collapse:collapse;margin:1rem 0;font-size:.9rem}th,td{padding:.25rem .6rem;border-bottom:1px solid #ddd;
text-align:right}th{background:#f4f4f4}code{background:#f4f4f4;padding:.1rem .3rem}img{max-width:100%}
.reading li{margin:.3rem 0}table.meanings td{text-align:left}table.soup td:last-child{text-align:left}
.wide{overflow-x:auto;max-width:100%}ul.columns{font-size:.85rem;color:#444}"""


def render(diag: Diagnosis, command: str, seconds: float) -> str:
    """Return the report as one self-contained HTML page."""
    p = diag.prepared
    meanings = pd.DataFrame({"what it means": MEANINGS}).rename_axis("number")
    layers = diag.layers.pivot_table(index=["model", "pair", "layer"], columns="metric", values="value")
    ranks = diag.ranks[diag.ranks["metric"].isin(["effective_rank", "stable_rank", "rel_effective_rank"])]
    parts = [
        f"<h1>lmcbook diagnose</h1><p><code>{html.escape(command)}</code></p>",
        f"<p>{len(p.models)} checkpoints of <code>{html.escape(p.model_name)}</code> on "
        f"<code>{html.escape(p.data_name)}</code> ({', '.join(f'{k} {v}' for k, v in p.data.sizes().items())} "
        f"examples); L = {diag.depth} layers; {len(p.lams)} λ points; {seconds:.1f} s; lmcbook {__version__}.</p>",
        "<h2>Summary</h2>", _table(summary_table(diag), "summary"),
        "<h2>Reading</h2>", _list(diag.reading, "reading"), "<h2>Notes</h2>", _list(diag.notes, "notes"),
        "<h2>What each number means</h2>", _table(meanings, "meanings"),
        "<h2>Interpolation curves</h2>", _png(plots_width.plot_pair_curves(diag.curves)),
        "<h2>All numbers per pair</h2>",
        f'<div class="wide">{_table(diag.pairs.set_index(["pair", "method"]).T, "pairs")}</div>',
        "<h2>LEWC and LLFC by layer, against an untrained pair</h2>", _png(plots_width.plot_layer_errors(diag.layers)),
        _worded(layers, "layers"),
    ]
    if len(diag.theory):
        theory = diag.theory.pivot_table(index=["pair", "layer"], columns="metric", values="value")
        parts += ["<h2>Weak additivity and reciprocal orthogonality (λ = ½)</h2>", _worded(theory, "theory")]
    parts += ["<h2>Ranks of the weight matrices</h2>",
              _worded(ranks.pivot_table(index=["checkpoint", "layer", "name"], columns="metric", values="value"),
                      "ranks")]
    if diag.soup:
        parts += [f"<h2>The uniform soup of all {diag.soup['K']}</h2>",
                  _table(pd.DataFrame({"value": {COLUMNS[k][0]: v for k, v in diag.soup.items()},
                                       "what it means": {COLUMNS[k][0]: COLUMNS[k][1] for k in diag.soup}}),
                         "soup meanings")]
    parts.append(f"<p>Written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; every number is in "
                 "<code>report.csv</code>, the summary in <code>summary.json</code>.</p>")
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>lmcbook diagnose</title>'
            f"<style>{STYLE}</style></head><body>{''.join(parts)}</body></html>\n")
