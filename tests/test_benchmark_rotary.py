"""benchmarks/rotary.py runs and reports both paths; no timing asserted."""

import json

import pytest
import torch

from transformer_book.positional import apply_rotary


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("rotary")


def test_reports_each_path_as_one_json_line(bench, capsys):
    result = bench.main(["--batch", "2", "--length", "3", "--head-dim", "4",
                         "--repeats", "2"])
    assert set(result) == {"complex", "real"}
    assert all(us > 0 for us in result.values())
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert json.loads(last) == result


def test_the_real_formula_is_the_same_function(bench):
    x = torch.randn(3, 5, 2, 8, dtype=torch.float64).transpose(1, 2)
    for offset in (0, 7):
        torch.testing.assert_close(bench.real_formula(x, offset),
                                   apply_rotary(x, offset=offset))


@pytest.mark.parametrize("argv, message", [
    (["--repeats", "0"], "--repeats must be at least 1"),
    (["--head-dim", "5"], "--head-dim must be even"),
])
def test_bad_numbers_are_refused(bench, argv, message):
    with pytest.raises(SystemExit, match=message):
        bench.main(argv)
