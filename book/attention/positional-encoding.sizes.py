# Sizes of positional-encoding.md, read by transformer_book._book.sizes.
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

cpu = {
    "d_model": 32,
    "train_len": 16,
    "steps": 400,
    "batch": 64,
    "eval_lengths": [16, 32, 64, 128, 256],
    "eval_batch": 256,
    "baseline_sequences": 4096,
}

gpu = {
    "d_model": 64,
    "train_len": 32,
    "steps": 1500,
    "batch": 128,
    "eval_lengths": [32, 64, 128, 256, 512, 1024],
    "eval_batch": 256,
    "baseline_sequences": 4096,
}

smoke = {
    "steps": 3,
    "batch": 8,
    "eval_lengths": [32, 64, 128],
    "eval_batch": 8,
    "baseline_sequences": 64,
}
