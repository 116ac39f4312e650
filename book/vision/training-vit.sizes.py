# Sizes of training-vit.md, read by transformer_book._book.sizes.
# The ViT and its training recipe are recipes.get("vit", preset); "vit"
# holds the sizes this page changes in it, and "eval_every" how often
# recipes.trained evaluates it. what-vit-sees.md asks recipes.trained for
# the same model with the same two values (a test checks), so the page
# that runs second reads it back instead of training it.
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

# A model this small gains little from several threads.
threads = 1

cpu = {
    # 4,000 digits of MNIST 5k, the recipe's own sizes.
    "dataset": "MNIST 5k",
    "vit": {},
    "eval_every": 126,
    "cnn_channels": (16, 32, 64),
    "cnn_hidden": 128,
    "patch_sizes": (7, 14),
}

gpu = {
    # Fashion-MNIST's 60,000 images on a GPU.
    "dataset": "Fashion-MNIST",
    "vit": {},
    "eval_every": 400,
    "cnn_channels": (32, 64, 128),
    "cnn_hidden": 600,
    "patch_sizes": (4, 7, 14),
}

smoke = {
    "vit": {"steps": 10, "batch_size": 8, "d_model": 16, "num_layers": 1,
            "d_ff": 32},
    "eval_every": 5,
    "cnn_channels": (4, 8, 8),
    "cnn_hidden": 16,
}
