"""save_combine and load_combine over tape/static/params.py (Paddle's combined file)."""
from tape import dtypes
from tape.registry import kernel


@kernel("save_combine", types=dtypes.ALL)
def save_combine(X, file_path, overwrite, save_as_fp16):
    from tape.static import params
    params.save_combined(file_path, X, save_as_fp16, overwrite)


@kernel("load_combine")
def load_combine(file_path, load_as_fp16):
    from tape.static import params
    return params.load_combined(file_path, load_as_fp16=load_as_fp16)
