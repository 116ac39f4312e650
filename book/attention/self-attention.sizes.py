# Sizes of self-attention.md, read by transformer_book._book.sizes.
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

cpu = {
    "trials": 1000,
    "steps": 120,
    "batch": 128,
}

gpu = {
    "trials": 20000,
    "steps": 1000,
    "batch": 256,
}

smoke = {
    "trials": 100,
    "steps": 3,
    "batch": 16,
}
