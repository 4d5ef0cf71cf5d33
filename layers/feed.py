"""Fill: a data feeder that writes arrays into existing Variables."""

import tape
from tape.variable import Variable


class Fill:
    """Writes data into a Variable through an ``assign`` op (the seed design's data feeder).

    ``Fill()(variable, array)`` copies ``array`` (anything ``np.asarray`` takes; Python floats
    become float32) into ``variable``, whose shape and dtype become the array's, and returns
    ``variable``. The Variable keeps its name, so the same input can be fed every iteration.

    >>> x = tape.Variable(name="input")
    >>> feed = Fill()
    >>> feed(x, np.zeros((2, 3), np.float32)).shape
    (2, 3)
    """

    def __call__(self, variable: Variable, array) -> Variable:
        tape.get_global_tape().add_op("assign", {"X": [Variable(array)]}, {"Out": [variable]})
        return variable
