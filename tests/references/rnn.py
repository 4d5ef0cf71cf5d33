"""Reference for Paddle's fused rnn op: element by element, each direction run over the element's
own valid steps only (the reverse one from its last valid step), written from the equations."""
import numpy as np


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _step(mode, x, h, c, w_ih, w_hh, b_ih, b_hh):
    gx, gh = w_ih @ x + b_ih, w_hh @ h + b_hh
    if mode == "LSTM":
        i, f, g, o = np.split(gx + gh, 4)
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        return _sigmoid(o) * np.tanh(c), c
    if mode == "GRU":
        (xr, xz, xn), (hr, hz, hn) = np.split(gx, 3), np.split(gh, 3)
        r, z = _sigmoid(xr + hr), _sigmoid(xz + hz)
        n = np.tanh(xn + r * hn)
        return (1 - z) * n + z * h, None
    a = gx + gh
    return (np.tanh(a) if mode == "RNN_TANH" else np.maximum(a, 0)), None


def rnn(Input, PreState, WeightList, mode, num_layers, is_bidirec, hidden_size, dropout_prob,
        seed, is_test, SequenceLength=None):
    T, B, _ = Input.shape
    D, H, L = 2 if is_bidirec else 1, hidden_size, num_layers
    count = L * D
    lengths = [T] * B if SequenceLength is None else [int(n) for n in SequenceLength]
    keep = None if is_test else np.ones((L - 1, T, B, D * H), np.uint8)
    if not is_test and dropout_prob > 0:
        keep = (np.random.default_rng(seed).random(keep.shape) >= dropout_prob).astype(np.uint8)
    states = [np.array(s, copy=True) for s in PreState]
    x = Input
    for layer in range(L):
        if layer and not is_test and dropout_prob > 0:
            x = x * keep[layer - 1] / (1 - dropout_prob)
        out = np.zeros((T, B, D * H), Input.dtype)
        for d in range(D):
            k = layer * D + d
            w = (WeightList[2 * k], WeightList[2 * k + 1], WeightList[2 * count + 2 * k],
                 WeightList[2 * count + 2 * k + 1])
            for b in range(B):
                h = PreState[0][k, b]
                c = PreState[1][k, b] if mode == "LSTM" else None
                valid = range(lengths[b])
                for t in (reversed(valid) if d else valid):
                    h, c = _step(mode, x[t, b], h, c, *w)
                    out[t, b, d * H:(d + 1) * H] = h
                states[0][k, b] = h
                if mode == "LSTM":
                    states[1][k, b] = c
        x = out
    return x, keep, states
