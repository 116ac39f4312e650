# Sizes of int8.md, read by transformer_book._book.sizes.
# The model is the GPT chapter's (book.trained_gpt()); these sizes only
# choose how much of the validation text the page's experiments read.
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

threads = 1

cpu = {
    # Seeds of uniform noise of half an int8 step: the spread that
    # judges int8's change of the validation loss.
    "noise_seeds": 5,
    # Validation windows whose activations feed the per-layer errors.
    "capture_windows": 64,
    # Sizes of the injected outliers, in multiples of the largest value.
    "outlier_factors": (1, 2, 5, 10, 20, 50, 100),
}

gpu = {
    # More noise seeds and windows: cheap on a GPU.
    "noise_seeds": 10,
    "capture_windows": 256,
    "outlier_factors": (1, 2, 5, 10, 20, 50, 100),
}

smoke = {
    "noise_seeds": 3,
    "capture_windows": 2,
    "outlier_factors": (1, 10, 100),
}
