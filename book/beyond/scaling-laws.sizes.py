# Sizes of scaling-laws.md, read by transformer_book._book.sizes.
# The grid is benchmarks/scaling.py's CSV, data/scaling.csv; the page
# trains one of its points again and checks the file's loss.
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

threads = 1

cpu = {
    # The grid's cheapest point: the smallest budget, the largest model.
    "rerun_budget": 1e11,
    "rerun_size": "d64-L2",
    "max_steps": None,  # None: the point's own steps
    "valid_windows": None,  # None: every validation window
}

gpu = {
    # A point of the largest budget (another device: no exact match).
    "rerun_budget": 9e11,
    "rerun_size": "d48-L2",
    "max_steps": None,
    "valid_windows": None,
}

smoke = {
    "rerun_budget": 1e11,
    "rerun_size": "d64-L2",
    "max_steps": 2,
    "valid_windows": 2,
}
