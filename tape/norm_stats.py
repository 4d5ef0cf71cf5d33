"""Which statistics batch_norm normalises with: a choice its shape rule (tape/ops/norm.py) and
its kernels make from the same attributes, kept in the core so that both read it from here."""


def uses_global_stats(is_test: bool, use_global_stats: bool, trainable_statistics: bool) -> bool:
    """Whether batch_norm normalises with the running statistics (Paddle's global_stats)."""
    return (is_test and not trainable_statistics) or use_global_stats
