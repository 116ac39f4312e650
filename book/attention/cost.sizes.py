# Sizes of cost.md, read by transformer_book._book.sizes.
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

cpu = {
    "d_model": 64,
    "num_heads": 4,
    "batch": 1,
    "repeats": 5,
    "lengths": (64, 128, 256, 512, 1024, 2048),
}

gpu = {
    "d_model": 128,
    "num_heads": 8,
    "batch": 2,
    "repeats": 10,
    "lengths": (256, 512, 1024, 2048, 4096, 8192),
}

smoke = {
    "repeats": 1,
    "lengths": (256, 512),
}
