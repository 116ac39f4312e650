# Sizes of kv-heads.md, read by transformer_book._book.sizes.
# The trained model is the GPT chapter's (book.trained_gpt()); the
# training sweep is benchmarks/kv_heads.py's CSV, kv-heads.csv.
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

threads = 1

cpu = {
    "eval_windows": None,  # validation windows scored; None: every one
    "uptrain_steps": 62,  # 5% of the recipe's 1,250 steps
}

gpu = {
    "eval_windows": None,
    "uptrain_steps": 100,  # 5% of the recipe's 2,000 steps
}

smoke = {
    "eval_windows": 2,
    "uptrain_steps": 2,
}
