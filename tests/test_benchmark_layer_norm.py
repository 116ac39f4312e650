"""benchmarks/layer_norm.py runs and reports every path; no timing asserted."""

import json

import pytest


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("layer_norm")


def test_reports_each_path_as_one_json_line(bench, capsys):
    result = bench.main(["--tokens", "8", "--d-model", "4", "--repeats", "2"])
    assert set(result) == {"fused", "explicit", "var", "torch"}
    assert all(us > 0 for us in result.values())
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert json.loads(last) == result


def test_the_var_formula_is_the_same_function(bench):
    import torch

    from transformer_book.norm import LayerNorm

    norm = LayerNorm(6, dtype=torch.float64)
    norm.fused = False
    x = torch.randn(5, 6, dtype=torch.float64)
    torch.testing.assert_close(bench._var_formula(norm, x), norm(x))


def test_numbers_below_one_are_refused(bench):
    with pytest.raises(SystemExit, match="--repeats must be at least 1"):
        bench.main(["--repeats", "0"])
