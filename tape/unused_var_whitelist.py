"""Ops the unused-input check (``FLAGS_enable_unused_var_check``) leaves alone, with the reason.

The check counts an input as read when the kernel's body loads its parameter anywhere, on any
path; so an op belongs here only when its kernel reads an input in a way the body cannot show
(say, through a helper that takes the whole input dict), and the input cannot be dropped from
the proto or grad maker nor registered as no-need-buffer. Each entry is ``op type: reason``.
An op that fails the check is fixed, not listed, whenever it can be.

None is needed today: every registered op's kernels read each input they declare, except the
no-need-buffer ones, whose shape alone is used.
"""

UNUSED_VAR_WHITELIST: dict[str, str] = {}
