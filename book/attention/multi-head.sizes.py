# Sizes of multi-head.md, read by transformer_book._book.sizes.
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

# Every tensor on this page is tiny: handing such small operations to
# several threads costs more than it saves, badly so on a busy machine.
threads = 1

cpu = {
    "steps": 100,
    "batch": 128,
}

gpu = {
    "steps": 1000,
    "batch": 256,
}

smoke = {
    "steps": 3,
    "batch": 16,
}
