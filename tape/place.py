"""Where a value lives. Kernels are keyed by (place, dtype)."""


class Place:
    """``key`` identifies the place in kernel tables (a plain tuple: cheap to hash)."""

    __slots__ = ("key",)

    def __eq__(self, other):
        return isinstance(other, Place) and self.key == other.key

    def __hash__(self):
        return hash(self.key)


class CPUPlace(Place):
    """The host: values are numpy arrays."""

    def __init__(self):
        self.key = ("cpu",)

    def __repr__(self):
        return "CPUPlace"


class CUDAPlace(Place):
    """An NVIDIA GPU: values are cupy arrays (kernels arrive with the GPU backend)."""

    __slots__ = ("device_id",)

    def __init__(self, device_id: int = 0):
        self.device_id = device_id
        self.key = ("cuda", device_id)

    def __repr__(self):
        return f"CUDAPlace({self.device_id})"


CPU = CPUPlace()
