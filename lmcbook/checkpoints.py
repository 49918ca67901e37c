"""Reading a reader's own checkpoints safely: safetensors, or a PyTorch state dict read with ``weights_only=True``.

A state dict may be nested under a key (``"state_dict"``, ``"model"``, as training
frameworks save it) and carry DataParallel's ``module.`` prefix; both are undone.
Nothing is unpickled beyond tensors and plain containers.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch

from .specs import SpecError

#: Keys under which training frameworks nest the model's state dict, tried in this order.
NESTED_KEYS = ("state_dict", "model_state_dict", "model", "module", "net")
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
    except Exception as err:  # safetensors and torch.load raise many types on a bad file
        raise CheckpointError(f"checkpoint {str(path)!r} cannot be read ({type(err).__name__}: {err}); expected "
                              "safetensors or a state dict saved with torch.save(model.state_dict(), ...)") from err
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
