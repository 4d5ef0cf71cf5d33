"""A character-level LSTM language model, trained on the docstrings of Python's standard library.

    python examples/char_lstm.py [--steps 3000] [--hidden 128] [--embed 32] [--lr 0.005]
                                 [--min-len 16] [--max-len 64] [--sample 400] [--seed 0]

Each step draws one text window of random length, starts a fresh tape (``reset_global_tape``),
runs an LSTM over its characters (a sequence of one, of its own length: the tape records
whatever steps ran), and backpropagates the mean cross-entropy of predicting each next
character. It prints the loss (nats per character) as it falls, then samples text from the
model.

The default 3000 steps take about a minute here (one of two shared cores): the mean loss of the
first 250 steps, about 3.0 nats per character, falls to about 1.85.
"""
import os

# The matrices here are tiny: BLAS threads cost more than they save (3x slower on a busy machine).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import importlib  # noqa: E402
import inspect  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import tape  # noqa: E402
from tape import functional as F  # noqa: E402
from tape import layers, optim  # noqa: E402
from tape.variable import Variable  # noqa: E402

MODULES = ("argparse", "ast", "asyncio", "base64", "bisect", "calendar", "collections",
           "contextlib", "copy", "csv", "dataclasses", "datetime", "decimal", "difflib", "email",
           "enum", "fractions", "functools", "gettext", "glob", "gzip", "heapq", "http", "inspect",
           "io", "ipaddress", "itertools", "json", "locale", "logging", "mailbox", "math",
           "operator", "optparse", "os", "pathlib", "pickle", "pprint", "queue", "random", "re",
           "sched", "shlex", "shutil", "smtplib", "socket", "statistics", "string", "struct",
           "subprocess", "tarfile", "tempfile", "textwrap", "threading", "timeit", "tokenize",
           "traceback", "typing", "unittest", "urllib", "uuid", "warnings", "weakref", "zipfile")


def corpus() -> str:
    """The module docstrings of MODULES and of their public classes and functions: about 350 kB
    of English about Python, printable ASCII only, with table rules ("-----") cut to 3 chars."""
    texts = []
    for name in MODULES:
        module = importlib.import_module(name)
        objects = [getattr(module, attr, None) for attr in sorted(getattr(module, "__all__", ()))]
        texts.append(module.__doc__)
        texts += [obj.__doc__ for obj in objects if inspect.isclass(obj) or inspect.isroutine(obj)]
    texts = dict.fromkeys(t.strip() for t in texts if isinstance(t, str) and t.strip())
    text = "\n\n".join(texts)   # each distinct docstring once, in order
    text = "".join(ch for ch in text if ch == "\n" or " " <= ch <= "~")
    return re.sub(r"([^ \n])\1{3,}", r"\1\1\1", text)


class CharLSTM(layers.Layer):
    """Embedding -> LSTM over the characters -> Linear to next-character logits."""

    def __init__(self, vocab: int, embed: int, hidden: int):
        self.embed = layers.Embedding(vocab, embed)
        self.lstm = layers.LSTM(embed, hidden, time_major=True)
        self.out = layers.Linear(hidden, vocab)

    def __call__(self, ids: np.ndarray, state=None):
        """Logits (T, vocab) for the character after each of ``ids``, and the last state
        ``(h, c)``, each (1, 1, hidden)."""
        embedded = self.embed(Variable(ids[:, None]))     # (T, 1, embed): time-major, batch 1
        hidden, state = self.lstm(embedded, state)        # (T, 1, hidden)
        return self.out(hidden.squeeze(1)), state


def train(steps=3000, hidden=128, embed=32, lr=0.005, min_len=16, max_len=64, seed=0,
          report_every=250, log=print):
    """Train on random windows of the corpus; returns (model, vocabulary, mean loss per
    report_every steps)."""
    rng = np.random.default_rng(seed)
    tape.seed(seed)
    text = corpus()
    vocab = sorted(set(text))
    index = {ch: i for i, ch in enumerate(vocab)}
    data = np.array([index[ch] for ch in text], dtype=np.int64)
    log(f"corpus: {len(text)} characters from {len(MODULES)} modules, {len(vocab)} symbols")
    model = CharLSTM(len(vocab), embed, hidden)
    params = model.params()
    optimizer = optim.Adam(learning_rate=lr)
    history, window = [], []
    start = time.perf_counter()
    for step in range(1, steps + 1):
        length = int(rng.integers(min_len, max_len + 1))
        at = int(rng.integers(0, len(data) - length - 1))
        chunk = data[at:at + length + 1]
        tape.reset_global_tape()                          # a fresh tape per sequence
        logits, _ = model(chunk[:-1])
        loss = F.cross_entropy(logits, chunk[1:])
        loss.backward()
        optimizer(params)
        window.append(float(loss.value()))
        if step % report_every == 0:
            history.append(float(np.mean(window)))
            window.clear()
            log(f"step {step:5d}  loss {history[-1]:.3f} nats/char  "
                f"({time.perf_counter() - start:.0f} s)")
    return model, vocab, history


def sample(model, vocab, prompt="The ", length=400, temperature=0.7, seed=0) -> str:
    """Text continuing ``prompt``, drawn one character at a time (no tape recorded)."""
    rng = np.random.default_rng(seed)
    index = {ch: i for i, ch in enumerate(vocab)}
    ids = np.array([index[ch] for ch in prompt], dtype=np.int64)
    out = list(prompt)
    with tape.no_grad():
        logits, state = model(ids)
        for _ in range(length):
            z = logits.value()[-1].astype(np.float64) / temperature
            p = np.exp(z - z.max())
            nxt = int(rng.choice(len(vocab), p=p / p.sum()))
            out.append(vocab[nxt])
            logits, state = model(np.array([nxt]), state)
    return "".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--embed", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.005)
    parser.add_argument("--min-len", type=int, default=16)
    parser.add_argument("--max-len", type=int, default=64)
    parser.add_argument("--sample", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    model, vocab, history = train(args.steps, args.hidden, args.embed, args.lr, args.min_len,
                                  args.max_len, args.seed)
    print(f"loss: {history[0]:.3f} -> {history[-1]:.3f} nats/char")
    print("sample:\n" + sample(model, vocab, length=args.sample, seed=args.seed))


if __name__ == "__main__":
    main()
