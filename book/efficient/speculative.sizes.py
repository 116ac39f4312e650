# Sizes of speculative.md, read by transformer_book._book.sizes.
# The target is the GPT chapter's model (book.trained_gpt()); the draft
# is recipes.get("gpt", preset) with the draft_* sizes, trained here.
# cpu and gpu: the presets (same keys); smoke: what a smoke run
# (BOOK_SMOKE=1) puts in place of gpu's; threads: compute threads.

threads = 1

cpu = {
    # The draft: one layer of width 64 (the target: three of width 128).
    "draft_d_model": 64,
    "draft_heads": 4,
    "draft_layers": 1,
    "draft_steps": 800,
    "valid_windows": None,  # None: every window of the validation text
    "prompt": "ROMEO:\nMy lord, I",  # the traced round
    "histogram_prompt": "JULIET:\nWhat is your na",
    "trace_k": 4,
    "greedy_tokens": 80,  # the greedy text shown
    "draws": 2000,  # one-token continuations for the histogram
    "prompts": 4,  # validation windows continued in the sweep
    "prompt_chars": 16,
    "new_tokens": 48,  # prompt + new tokens fit the target's 64
    "ks": (1, 2, 3, 4, 5, 6, 7, 8),
    "seeds": 4,  # sampled runs: seed s continues prompt s % prompts
    "repeats": 3,  # timings: the fastest of this many runs
}

gpu = {
    "draft_d_model": 128,
    "draft_heads": 4,
    "draft_layers": 1,
    "draft_steps": 2000,
    "valid_windows": None,
    "prompt": "ROMEO:\nMy lord, I",
    "histogram_prompt": "JULIET:\nWhat is your na",
    "trace_k": 4,
    "greedy_tokens": 200,
    "draws": 5000,
    "prompts": 8,
    "prompt_chars": 64,
    "new_tokens": 192,
    "ks": (1, 2, 3, 4, 5, 6, 7, 8),
    "seeds": 8,
    "repeats": 5,
}

smoke = {
    "draft_steps": 2,
    "greedy_tokens": 8,
    "valid_windows": 1,
    "draws": 40,
    "prompts": 2,
    "prompt_chars": 8,
    "new_tokens": 8,
    "ks": (1, 2),
    "seeds": 1,
    "repeats": 1,
}
