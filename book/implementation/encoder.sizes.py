# Sizes of encoder.md, read by transformer_book._book.sizes.
# The encoder and its MLM pre-training are recipes.get("mlm", preset).
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

# The models here are small: splitting their matrix products across
# threads costs more than it saves.
threads = 1

cpu = {
    # A two-layer encoder, 1,000 MLM steps on one CPU thread.
    "mlm_batch": 32,
    "mlm_steps": 1000,
    # Fine-tuning: labelled sentences per chapter, runs (seeds) per
    # count, and steps of 16 sentences per run.
    "labels_per_class": (16, 64),
    "finetune_seeds": 3,
    "finetune_steps": 100,
    "random_size": 128,
    "random_epochs": 30,
    "held_out": 256,
    # The LSTM and the attention classifier on the chapter task.
    "rnn_width": 64,
    "rnn_epochs": 12,
    "test_sentences": None,  # None: 30% of the sentences
    "max_len": 32,
    "bow_steps": 100,
}

gpu = {
    # A wider, deeper encoder and longer pre-training on a GPU.
    "mlm_batch": 128,
    "mlm_steps": 3000,
    "labels_per_class": (16, 64, 128),
    "finetune_seeds": 3,
    "finetune_steps": 200,
    "random_size": 192,
    "random_epochs": 60,
    "held_out": 634,
    "rnn_width": 256,
    "rnn_epochs": 20,
    "test_sentences": None,  # None: 30% of the sentences
    "max_len": 32,
    "bow_steps": 100,
}

smoke = {
    "mlm_steps": 2,
    "mlm_batch": 8,
    "labels_per_class": (2,),
    "finetune_seeds": 2,
    "finetune_steps": 1,
    "random_size": 16,
    "random_epochs": 2,
    "held_out": 32,
    "rnn_width": 16,
    "rnn_epochs": 1,
    "test_sentences": 32,
    "max_len": 8,
    "bow_steps": 2,
}
