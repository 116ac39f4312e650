# Sizes of what-vit-sees.md, read by transformer_book._book.sizes.
# "vit" and "eval_every" are training-vit.md's values (a test checks):
# both pages ask recipes.trained("vit") for the same model, so this page
# reads back the ViT that training-vit.md trained (or trains it, once).
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

# A model this small gains little from several threads.
threads = 1

cpu = {
    "vit": {},
    "eval_every": 126,
    "digits": None,  # test digits to read the model on; None: all of them
}

gpu = {
    "vit": {},
    "eval_every": 400,
    "digits": None,  # None: all of them
}

smoke = {
    "vit": {"steps": 10, "batch_size": 8, "d_model": 16, "num_layers": 1,
            "d_ff": 32},
    "eval_every": 5,
    "digits": 256,
}
