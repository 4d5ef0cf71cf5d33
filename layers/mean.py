"""Mean: the average of all elements, the usual last step to a scalar loss."""
import tape
from tape.variable import Variable

from .layer import Layer


class Mean(Layer):
    """``y = mean(x)``: the average of every element of ``x``, as a 0-D Variable (op ``mean``).

    >>> Mean()(tape.Variable(np.array([1.0, 2.0, 6.0]))).value()
    array(3.)
    """

    def __call__(self, x: Variable) -> Variable:
        return tape.ops.mean(x)
