# Sizes of what-vit-sees.md, read by transformer_book._book.sizes.
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

# A model this small gains little from several threads.
threads = 1

cpu = {
    "epochs": 14,
    "digits": None,  # None: all of them
}

gpu = {
    "epochs": 40,
    "digits": None,  # None: all of them
}

smoke = {
    "epochs": 1,
    "digits": 256,
}
