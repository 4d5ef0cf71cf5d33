"""Where a value lives. Kernels are keyed by (place, dtype)."""


class Place:
    __slots__ = ()

    def __eq__(self, other):
        return type(self) is type(other) and self._key() == other._key()

    def __hash__(self):
        return hash((type(self).__name__, self._key()))

    def _key(self):
        return ()


class CPUPlace(Place):
    """The host: values are numpy arrays."""

    def __repr__(self):
        return "CPUPlace"


class CUDAPlace(Place):
    """An NVIDIA GPU: values are cupy arrays (kernels arrive with the GPU backend)."""

    __slots__ = ("device_id",)

    def __init__(self, device_id: int = 0):
        self.device_id = device_id

    def _key(self):
        return (self.device_id,)

    def __repr__(self):
        return f"CUDAPlace({self.device_id})"


CPU = CPUPlace()
