# Sizes of transformer-layer.md, read by transformer_book._book.sizes.
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

# The tensors on this page are small: one thread is faster than several.
threads = 1

cpu = {
    "depths": (3, 6, 12, 24),
    "seeds": 3,
    "d_model": 64,
    "batch": 8,
    "T": 32,
}

gpu = {
    "depths": (3, 6, 12, 24, 48, 96),
    "seeds": 5,
    "d_model": 128,
    "batch": 16,
    "T": 64,
}

smoke = {
    "depths": (3, 6),
    "seeds": 1,
}
