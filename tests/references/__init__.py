"""numpy forward references, one module per op family: a function per op type, named after it.

A reference takes the op's input slots and attributes as keyword arguments (``X``, ``Y``,
``axis``, ...) and returns the op's non-intermediate outputs in proto order (one array, or a
tuple). Random ops instead define ``check_<type>(outputs, attrs)``, asserting properties.
"""
