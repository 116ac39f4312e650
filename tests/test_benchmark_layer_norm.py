"""benchmarks/layer_norm.py runs and reports every path; no timing asserted."""

import importlib.util
import json
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "layer_norm.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("layer_norm_bench", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_reports_each_path_as_one_json_line(bench, capsys):
    result = bench.main(["--tokens", "8", "--d-model", "4", "--repeats", "2"])
    assert set(result) == {"fused", "explicit", "var", "torch"}
    assert all(us > 0 for us in result.values())
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert json.loads(last) == result


def test_the_var_formula_is_the_same_function(bench):
    import torch

    from transformer_book.layers import LayerNorm, explicit_norm

    norm = LayerNorm(6, dtype=torch.float64)
    x = torch.randn(5, 6, dtype=torch.float64)
    with explicit_norm():
        torch.testing.assert_close(bench._var_formula(norm, x), norm(x))


def test_numbers_below_one_are_refused(bench):
    with pytest.raises(SystemExit, match="--repeats must be at least 1"):
        bench.main(["--repeats", "0"])
