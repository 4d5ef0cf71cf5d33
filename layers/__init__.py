"""Layers: functions that own parameters and add ops to the global tape, and data feeders."""
from .attention import MultiHeadAttention
from .builder import GRUBuilder, LSTMBuilder, RNNState, SimpleRNNBuilder
from .container import LayerList, ParameterDict, ParameterList
from .conv import Conv2D, Conv2DTranspose
from .dropout import Dropout
from .embedding import Embedding
from .feed import Fill
from .flatten import Flatten
from .layer import Layer
from .linear import Linear
from .mean import Mean
from .norm import BatchNorm, GroupNorm, InstanceNorm2D, LayerNorm
from .pool import AvgPool2D, MaxPool2D, Pool2D
from .recurrent import GRUCell, LSTMCell, SimpleRNNCell
from .rnn import GRU, LSTM
from .sequential import Sequential
from .transformer import TransformerEncoder, TransformerEncoderLayer
from .upsample import Upsample

__all__ = ["AvgPool2D", "BatchNorm", "Conv2D", "Conv2DTranspose", "Dropout", "Embedding", "Fill",
           "Flatten", "GRU", "GRUBuilder", "GRUCell", "GroupNorm", "InstanceNorm2D", "LSTM",
           "LSTMBuilder", "LSTMCell", "Layer", "LayerList", "LayerNorm", "Linear", "MaxPool2D",
           "Mean", "MultiHeadAttention", "ParameterDict", "ParameterList", "Pool2D", "RNNState",
           "Sequential", "SimpleRNNBuilder", "SimpleRNNCell", "TransformerEncoder",
           "TransformerEncoderLayer", "Upsample"]
