"""save_combine and load_combine over tape/params.py (Paddle's combined file)."""
from tape import dtypes, params
from tape.registry import kernel


@kernel("save_combine", types=dtypes.ALL)
def save_combine(X, file_path, overwrite, save_as_fp16):
    params.save_combined(file_path, X, save_as_fp16, overwrite)


@kernel("load_combine")
def load_combine(file_path, load_as_fp16):
    return params.load_combined(file_path, load_as_fp16=load_as_fp16)
