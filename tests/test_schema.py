"""The results schema's row selection: which layer is a page's last hidden layer."""

import pandas as pd
import torch

from lmcbook import claims, probes, schema
from lmcbook.models import MLP, ResNet20

UNITS = [16, 64, 256, 1024]


def _lewc(layers, role=None, value=lambda layer, units, method: 0.1):
    """LEWC rows of a probe frame (with ``role``: layer -> "hidden"/"output") or of a page's CSV (without it), five
    pairs per width, trained and untrained."""
    rows = [{"notebook": "lewc", "metric": metric, "value": value(layer, u, method) + 0.001 * (p - 2), "pair": p,
             "hidden_units": u, "layer": layer, "lam": 0.5, "method": method}
            for metric in ("lewc_rel_err", "lewc_cos") for method in ("trained", "untrained") for layer in layers
            for u in UNITS for p in range(5)]
    df = pd.DataFrame(rows)
    return df.assign(role=df["layer"].map(role)) if role else df


def _weight_norms(layers):
    """A page's training-regime rows: ‖θ‖ (layer NaN) and ‖W_l‖_F of every weight layer, per model."""
    return pd.DataFrame([{"notebook": "lewc", "metric": "weight_norm", "value": 1.0, "seed": s, "pair": s // 2,
                          "hidden_units": u, "layer": layer}
                         for layer in [float("nan"), *layers] for u in UNITS for s in range(10)])


def test_last_hidden_of_an_mlp_is_the_layer_before_the_logits():
    roles = {1: "hidden", 2: "hidden", 3: "hidden", 4: "output"}
    assert schema.last_hidden(_lewc(range(1, 5), roles)) == 3  # a probe frame
    assert schema.last_hidden(pd.concat([_lewc(range(1, 5)), _weight_norms(range(1, 5))])) == 3  # a page's CSV
    assert schema.last_hidden(_lewc(range(1, 5))) == 3  # a CSV without weight norms: the highest layer is the head


def test_last_hidden_of_resnet_blocks_is_the_last_block():
    """ResNet20's probes record its 9 residual blocks, all hidden, and not its head (layer 20 of its weights): the
    last hidden layer is block 9, not block 8."""
    assert schema.last_hidden(_lewc(range(1, 10), dict.fromkeys(range(1, 10), "hidden"))) == 9
    assert schema.last_hidden(pd.concat([_lewc(range(1, 10)), _weight_norms(range(1, 21))])) == 9


def test_the_lewc_probe_names_each_layers_role():
    torch.manual_seed(0)
    mlp = probes.PairActivations(MLP(16, 10, 8, depth=3), MLP(16, 10, 8, depth=3), torch.randn(32, 16)).lewc([0.5])
    assert dict(zip(mlp["layer"], mlp["role"])) == {1: "hidden", 2: "hidden", 3: "output"}
    assert schema.last_hidden(mlp) == 2
    a, b = ResNet20(3, 10, 2), ResNet20(3, 10, 2)
    blocks = probes.PairActivations(a, b, torch.randn(8, 3, 32, 32), points="blocks", warn=False).lewc([0.5])
    assert set(blocks["role"]) == {"hidden"} and schema.last_hidden(blocks) == 9


def test_w3_reads_the_last_residual_block():
    """On a ResNet's CSV, W3 reads block 9: here only block 9's LEWC error falls with width."""
    def error(layer, units, method):
        return 0.8 if method == "untrained" or layer < 9 else 0.8 - 0.1 * UNITS.index(units)

    r = claims.width.claim_w3(pd.concat([_lewc(range(1, 10), value=error), _weight_norms(range(1, 21))]))
    assert r.passed, r.measured
