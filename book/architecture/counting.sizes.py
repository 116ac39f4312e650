# Sizes of counting.md, read by transformer_book._book.sizes.
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

# The measurements here are small and counted, not timed: one thread.
threads = 1

cpu = {
    "d_model": 64,
    "num_heads": 4,
    "lengths": (16, 32, 64, 128, 256, 512, 1024),
}

gpu = {
    "d_model": 128,
    "num_heads": 8,
    "lengths": (16, 32, 64, 128, 256, 512, 1024, 2048, 4096),
}

smoke = {
    "lengths": (16, 32, 64),
}
