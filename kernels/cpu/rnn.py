"""rnn and rnn_grad: a loop over layers, directions and steps, each step one matrix product with
the whole batch (the input's products for all steps at once).

Written against the array module ``xp`` (numpy here; the CUDA kernels pass the device module), so
one body serves both places. Reserve's layout (per layer, direction, step, element, in units of
H): the gate values (A = 4 for LSTM's i, f, g, o and GRU's r, z, n, W_hn h + b_hn; 1 for an Elman
network's new h), the state after the step, the step's output, and an LSTM's cell after it.
"""
import numpy as np

from tape.random import generator
from tape.registry import kernel

_ACTS = {"LSTM": 4, "GRU": 4, "RNN_TANH": 1, "RNN_RELU": 1}
_WIDTH = {"LSTM": 7, "GRU": 6, "RNN_TANH": 3, "RNN_RELU": 3}


def _sigmoid(xp, x):
    return 1 / (1 + xp.exp(-x))


def _weights(weights, k: int, count: int):
    """(weight_ih, weight_hh, bias_ih, bias_hh) of layer-direction ``k``."""
    return weights[2 * k], weights[2 * k + 1], weights[2 * count + 2 * k], \
        weights[2 * count + 2 * k + 1]


def _cell(xp, mode, xg, h, c, w_hh, b_hh, H):
    """One step from the input's gate products ``xg``: (gate values, new h, new c)."""
    hg = h @ w_hh.T + b_hh
    if mode == "LSTM":
        g = xg + hg
        i, f, o = _sigmoid(xp, g[:, :H]), _sigmoid(xp, g[:, H:2 * H]), _sigmoid(xp, g[:, 3 * H:])
        cand = xp.tanh(g[:, 2 * H:3 * H])
        c2 = f * c + i * cand
        return xp.concatenate([i, f, cand, o], axis=1), o * xp.tanh(c2), c2
    if mode == "GRU":
        r = _sigmoid(xp, xg[:, :H] + hg[:, :H])
        z = _sigmoid(xp, xg[:, H:2 * H] + hg[:, H:2 * H])
        hn = hg[:, 2 * H:]
        n = xp.tanh(xg[:, 2 * H:] + r * hn)
        return xp.concatenate([r, z, n, hn], axis=1), n + z * (h - n), None
    a = xg + hg
    h2 = xp.tanh(a) if mode == "RNN_TANH" else xp.maximum(a, 0)
    return h2, h2, None


def _masks(xp, lengths, steps: int, dtype):
    """(steps, batch, 1): 1 where step t is within element b's length; None without lengths."""
    if lengths is None:
        return None
    return (xp.arange(steps)[:, None] < lengths.reshape(1, -1)).astype(dtype)[..., None]


def _dropout_masks(xp, layers, steps, batch, width, p, seed):
    """uint8 (layers - 1, steps, batch, width): which inputs of the layers past the first are
    kept; drawn on the host (a fixed seed gives the same mask on every place)."""
    shape = (max(layers - 1, 0), steps, batch, width)
    if p == 0:
        return xp.ones(shape, np.uint8)
    rng = generator() if seed == 0 else np.random.default_rng(seed)
    return xp.asarray((rng.random(shape) >= p).astype(np.uint8))


def _dropped(xp, x, keep, p):
    """upscale_in_train dropout of ``x`` with the kept mask ``keep``."""
    return x * keep.astype(x.dtype) / (1 - p) if p < 1 else xp.zeros_like(x)


def rnn_forward(xp, Input, PreState, WeightList, SequenceLength, mode, num_layers, is_bidirec,
                hidden_size, dropout_prob, seed, is_test):
    H, D, L = hidden_size, 2 if is_bidirec else 1, num_layers
    T, B, _ = Input.shape
    A, count, lstm = _ACTS[mode], L * D, mode == "LSTM"
    reserve = xp.zeros((L, D, T, B, _WIDTH[mode] * H), Input.dtype)
    mask = _masks(xp, SequenceLength, T, Input.dtype)
    training = not is_test
    drop = _dropout_masks(xp, L, T, B, D * H, dropout_prob, seed) if training \
        else None
    final_h, final_c, x = [], [], Input
    for layer in range(L):
        if layer and training and dropout_prob > 0:
            x = _dropped(xp, x, drop[layer - 1], dropout_prob)
        outs = []
        for d in range(D):
            k = layer * D + d
            w_ih, w_hh, b_ih, b_hh = _weights(WeightList, k, count)
            xg = x @ w_ih.T + b_ih
            h, c = PreState[0][k], PreState[1][k] if lstm else None
            for t in (range(T - 1, -1, -1) if d else range(T)):
                acts, h2, c2 = _cell(xp, mode, xg[t], h, c, w_hh, b_hh, H)
                if mask is None:
                    h, c, out = h2, c2, h2
                else:
                    m = mask[t]
                    h, out = m * h2 + (1 - m) * h, m * h2
                    c = m * c2 + (1 - m) * c if lstm else None
                slot = reserve[layer, d, t]
                slot[:, :A * H] = acts
                slot[:, A * H:(A + 1) * H] = h
                slot[:, (A + 1) * H:(A + 2) * H] = out
                if lstm:
                    slot[:, (A + 2) * H:] = c
            outs.append(reserve[layer, d, :, :, (A + 1) * H:(A + 2) * H])
            final_h.append(h)
            final_c.append(c)
        x = outs[0] if D == 1 else xp.concatenate(outs, axis=-1)
    states = [xp.stack(final_h)] + ([xp.stack(final_c)] if lstm else [])
    return xp.ascontiguousarray(x), drop, states, reserve


def _cell_grad(xp, mode, acts, h_prev, c_prev, dh2, dc2, H):
    """Through one step: (d gate pre-activations from the input side, from the state side, dh
    flowing past W_hh, dc_prev)."""
    if mode == "LSTM":
        i, f, cand, o = acts[:, :H], acts[:, H:2 * H], acts[:, 2 * H:3 * H], acts[:, 3 * H:]
        tc = xp.tanh(f * c_prev + i * cand)
        dc = dc2 + dh2 * o * (1 - tc * tc)
        grads = xp.concatenate([dc * cand * i * (1 - i), dc * c_prev * f * (1 - f),
                                dc * i * (1 - cand * cand), dh2 * tc * o * (1 - o)], axis=1)
        return grads, grads, 0, dc * f
    if mode == "GRU":
        r, z, n, hn = acts[:, :H], acts[:, H:2 * H], acts[:, 2 * H:3 * H], acts[:, 3 * H:]
        dn = dh2 * (1 - z) * (1 - n * n)
        dr = dn * hn * r * (1 - r)
        dz = dh2 * (h_prev - n) * z * (1 - z)
        return (xp.concatenate([dr, dz, dn], axis=1), xp.concatenate([dr, dz, dn * r], axis=1),
                dh2 * z, None)
    da = dh2 * (1 - acts * acts) if mode == "RNN_TANH" else dh2 * (acts > 0)
    return da, da, 0, None


def rnn_backward(xp, Input, PreState, WeightList, SequenceLength, DropoutState, Reserve, dOut,
                 dState, mode, num_layers, is_bidirec, hidden_size, dropout_prob, is_test):
    H, D, L = hidden_size, 2 if is_bidirec else 1, num_layers
    T, B, _ = Input.shape
    A, count, lstm = _ACTS[mode], L * D, mode == "LSTM"
    mask = _masks(xp, SequenceLength, T, Input.dtype)
    dropping = not is_test and dropout_prob > 0
    dweights = [xp.zeros_like(w) for w in WeightList]
    dstates = [xp.zeros_like(s) for s in PreState]
    dy = dOut
    for layer in range(L - 1, -1, -1):
        if layer:
            x = Reserve[layer - 1, :, :, :, (A + 1) * H:(A + 2) * H]     # (D, T, B, H)
            x = x[0] if D == 1 else xp.concatenate(list(x), axis=-1)
            if dropping:
                x = _dropped(xp, x, DropoutState[layer - 1], dropout_prob)
        else:
            x = Input
        dx = xp.zeros_like(x)
        for d in range(D):
            k = layer * D + d
            w_ih, w_hh, _, _ = _weights(WeightList, k, count)
            dh = dState[0][k].copy()
            dc = dState[1][k].copy() if lstm else None
            dxg = xp.zeros((T, B, w_ih.shape[0]), Input.dtype)
            order = list(range(T - 1, -1, -1) if d else range(T))
            for j in range(T - 1, -1, -1):
                t = order[j]
                slot = Reserve[layer, d, t]
                before = Reserve[layer, d, order[j - 1]] if j else None
                h_prev = before[:, A * H:(A + 1) * H] if j else PreState[0][k]
                c_prev = (before[:, (A + 2) * H:] if j else PreState[1][k]) if lstm else None
                dh2 = dy[t, :, d * H:(d + 1) * H] + dh
                dc2 = dc
                if mask is not None:
                    m = mask[t]
                    dh2, dh_kept = m * dh2, (1 - m) * dh
                    dc2, dc_kept = (m * dc, (1 - m) * dc) if lstm else (None, None)
                else:
                    dh_kept = dc_kept = 0
                dx_gates, dh_gates, dh_past, dc_prev = _cell_grad(
                    xp, mode, slot[:, :A * H], h_prev, c_prev, dh2, dc2, H)
                dxg[t] = dx_gates
                dweights[2 * k + 1] += dh_gates.T @ h_prev
                dweights[2 * count + 2 * k + 1] += dh_gates.sum(axis=0)
                dh = dh_gates @ w_hh + dh_past + dh_kept
                if lstm:
                    dc = dc_prev + dc_kept
            flat = dxg.reshape(T * B, -1)
            dweights[2 * k] += flat.T @ x.reshape(T * B, -1)
            dweights[2 * count + 2 * k] += flat.sum(axis=0)
            dx += dxg @ w_ih
            dstates[0][k] = dh
            if lstm:
                dstates[1][k] = dc
        if layer and dropping:
            dx = _dropped(xp, dx, DropoutState[layer - 1], dropout_prob)
        dy = dx
    return dy, dstates, dweights


@kernel("rnn")
def rnn(Input, PreState, WeightList, SequenceLength, mode, num_layers, is_bidirec, hidden_size,
        dropout_prob, seed, is_test):
    return rnn_forward(np, Input, PreState, WeightList, SequenceLength, mode, num_layers,
                       is_bidirec, hidden_size, dropout_prob, seed, is_test)


@kernel("rnn_grad")
def rnn_grad(Input, PreState, WeightList, SequenceLength, DropoutState, Reserve, dOut, dState,
             mode, num_layers, is_bidirec, hidden_size, dropout_prob, is_test):
    return rnn_backward(np, Input, PreState, WeightList, SequenceLength, DropoutState, Reserve,
                        dOut, dState, mode, num_layers, is_bidirec, hidden_size, dropout_prob,
                        is_test)
