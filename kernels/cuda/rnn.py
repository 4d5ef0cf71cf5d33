"""rnn and rnn_grad on the GPU: the CPU's loops over layers, directions and steps with the device
array module (cuBLAS products for the whole batch per step)."""
from ..cpu import rnn as cpu
from .device import DEVICE, cuda_kernel


@cuda_kernel("rnn")
def rnn(Input, PreState, WeightList, SequenceLength, mode, num_layers, is_bidirec, hidden_size,
        dropout_prob, seed, is_test):
    return cpu.rnn_forward(DEVICE, Input, PreState, WeightList, SequenceLength, mode, num_layers,
                           is_bidirec, hidden_size, dropout_prob, seed, is_test)


@cuda_kernel("rnn_grad")
def rnn_grad(Input, PreState, WeightList, SequenceLength, DropoutState, Reserve, dOut, dState,
             mode, num_layers, is_bidirec, hidden_size, dropout_prob, is_test):
    return cpu.rnn_backward(DEVICE, Input, PreState, WeightList, SequenceLength, DropoutState,
                            Reserve, dOut, dState, mode, num_layers, is_bidirec, hidden_size,
                            dropout_prob, is_test)
