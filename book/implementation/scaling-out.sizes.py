# Sizes of scaling-out.md, read by transformer_book._book.sizes.
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

cpu = {
    # The GPT chapter's model on the Python documentation, for a few steps.
    "steps": 40,
    "batch_size": 32,
    "d_model": 64,
    "num_layers": 2,
}

gpu = {
    "steps": 200,
    "batch_size": 64,
    "d_model": 128,
    "num_layers": 4,
}

smoke = {
    "steps": 1,
    "batch_size": 8,
}
