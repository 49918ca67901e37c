import pytest
import torch

from lmcbook.models import TAU_BOUNDS, fit_inverse_temperature, nll
from lmcbook.specs import SpecError


def _planted(tau, n=200_000, c=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, c, generator=g, dtype=torch.float64)
    y = torch.multinomial(torch.softmax(tau * z, 1), 1, generator=g)[:, 0]
    return z, y


@pytest.mark.parametrize("tau", [0.5, 50.0])
def test_planted_temperature_is_recovered(tau):
    z, y = _planted(tau)
    fit = fit_inverse_temperature(z, y)
    assert not fit.at_bound
    assert fit.tau == pytest.approx(tau, rel=0.02)
    assert fit.nll == pytest.approx(nll(z, y, fit.tau))
    assert fit.nll <= min(nll(z, y, fit.tau * 1.05), nll(z, y, fit.tau / 1.05))


def test_rescaled_logits_rescale_tau_exactly():
    z, y = _planted(2.0, n=20_000)
    t1 = fit_inverse_temperature(z, y).tau
    t2 = fit_inverse_temperature(4.0 * z, y).tau
    assert t2 == pytest.approx(t1 / 4.0, rel=1e-8)


def test_perfectly_separated_data_is_flagged():
    z = torch.randn(500, 5, dtype=torch.float64)
    y = z.argmax(1)
    fit = fit_inverse_temperature(z, y)
    assert fit.at_bound and fit.tau == TAU_BOUNDS[1]


def test_anti_correlated_logits_hit_the_lower_bound():
    z = torch.randn(500, 5, dtype=torch.float64)
    fit = fit_inverse_temperature(z, z.argmin(1))
    assert fit.at_bound and fit.tau == TAU_BOUNDS[0]


def test_bad_input():
    with pytest.raises(ValueError, match="bounds"):
        fit_inverse_temperature(torch.zeros(3, 2), torch.zeros(3, dtype=torch.long), bounds=(1.0, 0.5))
    with pytest.raises(ValueError, match="shape"):
        fit_inverse_temperature(torch.zeros(3), torch.zeros(3, dtype=torch.long))
    with pytest.raises(FloatingPointError, match="NaN"):
        fit_inverse_temperature(torch.full((3, 2), float("nan")), torch.zeros(3, dtype=torch.long))


@pytest.mark.parametrize("logits, labels, words", [
    (torch.zeros(0, 10), torch.zeros(0, dtype=torch.long), ["logits", "(0, 10)", "N >= 1"]),
    (torch.zeros(5, 0), torch.zeros(5, dtype=torch.long), ["logits", "(5, 0)", "C >= 1"]),
    (torch.zeros(5, 3), torch.zeros(4, dtype=torch.long), ["labels", "(4,)", "expected shape (5,)"]),
    (torch.zeros(2, 5, 3), torch.zeros(2, dtype=torch.long), ["logits", "(2, 5, 3)", "2-D", "(N, C)"]),
    (torch.zeros(5, 3, dtype=torch.long), torch.zeros(5, dtype=torch.long), ["logits", "torch.int64", "float"]),
    (torch.zeros(5, 3), torch.zeros(5), ["labels", "torch.float32", "integer"]),
    (torch.zeros(5, 3), torch.tensor([0, 1, 2, 3, 0]), ["labels", "[0, 3]", "3 classes", "[0, 2]"]),
    (torch.zeros(5, 3).tolist(), torch.zeros(5, dtype=torch.long), ["logits", "list", "torch.Tensor"]),
])
def test_bad_logits_or_labels_are_refused_before_any_compute(logits, labels, words, monkeypatch):
    from lmcbook import models

    monkeypatch.setattr(models, "brentq", lambda *a, **k: pytest.fail("reached the root finder"))
    monkeypatch.setattr(models, "_grad", lambda *a, **k: pytest.fail("reached the gradient"))
    with pytest.raises(SpecError) as err:
        fit_inverse_temperature(logits, labels)
    for w in words:
        assert w in str(err.value)
