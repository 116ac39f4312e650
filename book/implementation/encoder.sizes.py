# Sizes of encoder.md, read by transformer_book._book.sizes.
# The encoder and its MLM pre-training are recipes.get("mlm", preset).
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

# The models here are small: splitting their matrix products across
# threads costs more than it saves.
threads = 1

cpu = {
    # A two-layer encoder, a few hundred MLM steps on one CPU thread.
    "mlm_batch": 32,
    "mlm_steps": 300,
    "labels_per_class": (8, 32),
    "finetune_steps": 80,
    "finetune_epochs": 2,
    "random_size": 128,
    "random_epochs": 30,
    "held_out": 256,
    "rnn_epochs": 1,
    "step_cap": None,
    "test_sentences": None,  # None: 30% of the sentences
    "max_len": 32,
    "bow_steps": 100,
}

gpu = {
    # A wider, deeper encoder and longer pre-training on a GPU.
    "mlm_batch": 128,
    "mlm_steps": 3000,
    "labels_per_class": (8, 32, 128),
    "finetune_steps": 100,
    "finetune_epochs": 5,
    "random_size": 192,
    "random_epochs": 60,
    "held_out": 634,
    "rnn_epochs": 5,
    "step_cap": None,
    "test_sentences": None,  # None: 30% of the sentences
    "max_len": 32,
    "bow_steps": 100,
}

smoke = {
    "mlm_steps": 2,
    "mlm_batch": 8,
    "finetune_steps": 1,
    "finetune_epochs": 1,
    "random_size": 16,
    "random_epochs": 2,
    "held_out": 32,
    "rnn_epochs": 1,
    "step_cap": 1,
    "labels_per_class": (8,),
    "test_sentences": 32,
    "max_len": 8,
    "bow_steps": 2,
}
