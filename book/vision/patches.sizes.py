# Sizes of patches.md, read by transformer_book._book.sizes.
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

# The models here are small: splitting their matrix products across
# threads costs more than it saves.
threads = 1

cpu = {
    "batch": 32,
    "patch_sizes": (14, 7, 4, 2),
}

gpu = {
    "batch": 256,
    "patch_sizes": (14, 7, 4, 2, 1),
}

smoke = {
    "batch": 8,
}
