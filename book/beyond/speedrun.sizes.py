# Sizes of speedrun.md, read by transformer_book._book.sizes. The page
# runs a reduced ablation (a smaller GPT, fewer steps) with these sizes;
# the full one, at the speedrun recipe's own sizes, is
# `benchmarks/gpt_char.py --ablation`, which writes data/speedrun.csv.
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

threads = 1

cpu = {
    "d_model": 64,  # the reduced GPT; the rest is recipes.gpt_speedrun's
    "num_heads": 4,
    "num_layers": 2,
    "batch_size": 16,
    "steps": 120,
    "warmup": 12,
    "valid_windows": 256,  # validation windows scored after the last step
    "seeds": 3,
}

gpu = {
    "d_model": 128,
    "num_heads": 4,
    "num_layers": 3,
    "batch_size": 32,
    "steps": 300,
    "warmup": 30,
    "valid_windows": 1024,
    "seeds": 3,
}

smoke = {
    "steps": 3,
    "batch_size": 2,
    "warmup": 1,
    "valid_windows": 4,
    "seeds": 1,
}
