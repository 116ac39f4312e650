# Sizes of lstm-gru.md, read by transformer_book._book.sizes.
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

cpu = {
    "seeds": (0,),
    # recall: the recall task, the same on both presets
    "recall": {
        "lengths": (10, 30, 60),
        "train_steps": 300,
        "batch": 64,
        "hidden": 32,
    },
}

gpu = {
    "seeds": (0, 1, 2, 3, 4),
    # recall: the recall task, the same on both presets
    "recall": {
        "lengths": (10, 30, 60),
        "train_steps": 300,
        "batch": 64,
        "hidden": 32,
    },
}

smoke = {
    "seeds": (0,),
    "recall": {
        "lengths": (10, 30, 60),
        "train_steps": 5,
        "batch": 64,
        "hidden": 32,
    },
}
