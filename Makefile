# `make demo` and `make test` are all the set-up a fresh machine needs (Python >= 3.10 + pip).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell $(PYTHON) -c "import hashlib,sys; print(hashlib.sha1(open('pyproject.toml','rb').read()).hexdigest()[:12])")
# The numba kernels compiled ahead of time for this machine (kernels/aot.py), rebuilt when a
# kernel's source or the install changes; the module itself is keyed by a hash of them too.
AOT := $(VENV)/.aot-kernels

.PHONY: demo test bench lint clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@# Graphviz's dot turns tape.visualize's .dot files into pictures; optional, so a machine
	@# without apt (or not root) goes on without it
	@command -v dot >/dev/null || ! command -v apt-get >/dev/null || [ "$$(id -u)" != 0 ] || \
	    (apt-get update -qq && apt-get install -y -qq graphviz >/dev/null) || \
	    echo "note: could not install graphviz; tape.visualize will write .dot files only"
	@# Open MPI runs tape.distributed's ranks (mpirun, and the library mpi4py calls)
	@command -v mpirun >/dev/null || ! command -v apt-get >/dev/null || [ "$$(id -u)" != 0 ] || \
	    (apt-get update -qq && apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null) || \
	    echo "note: could not install Open MPI; the tests of tape.distributed will be skipped"
	$(BIN)/python -m pip install --quiet --upgrade pip
	@# interop: PaddlePaddle; onnx: onnx + onnxruntime; bench: DyNet, a benchmark peer whose
	@# models the tests check against Tape's; dist: mpi4py, whose wheel loads the
	@# machine's MPI library (Debian's Open MPI above) when used
	$(BIN)/python -m pip install --quiet -e '.[test,examples,interop,onnx,dist,bench]'
	@rm -f $(VENV)/.installed-*
	@touch $@

$(AOT): $(STAMP) $(shell find kernels -name '*.py')
	@# numba.pycc builds with setuptools, which venvs of Python >= 3.12 lack
	@$(BIN)/python -c "import setuptools" 2>/dev/null || $(BIN)/python -m pip install --quiet setuptools
	@if command -v cc >/dev/null; then $(BIN)/python -m tape.optim.compile_kernels; \
	else echo "note: no C compiler (cc): numba compiles every kernel on first use"; fi
	@touch $@

demo: $(STAMP) $(AOT)
	$(BIN)/python examples/digits.py

test: $(STAMP) $(AOT)
	$(BIN)/python -m pytest -q

bench: $(STAMP) $(AOT)
	$(BIN)/python benchmarks/per_op.py
	$(BIN)/python benchmarks/dynamic.py
	$(BIN)/python benchmarks/mlp.py
	$(BIN)/python benchmarks/cnn.py
	$(BIN)/python benchmarks/startup.py
	$(BIN)/python benchmarks/distributed.py

lint: $(STAMP)
	$(BIN)/python -m pip install --quiet ruff
	$(BIN)/ruff check tape kernels layers optim tests benchmarks examples

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis kernels/_aot

# Regenerate tape/framework_pb2.py (checked in) from tape/framework.proto. The pinned generator
# writes code for protobuf 7.35.1, the floor of the runtime pin in pyproject.toml. The module
# builds its messages in a private descriptor pool, so that it can share a process with
# PaddlePaddle's own framework_pb2, which defines the same message names.
.PHONY: proto
proto: $(STAMP)
	$(BIN)/python -m pip install --quiet grpcio-tools==1.85.1
	$(BIN)/python -m grpc_tools.protoc -I tape --python_out=tape tape/framework.proto
	sed -i -e 's/_descriptor_pool.Default()/_descriptor_pool.DescriptorPool()/' \
	    -e '1i # ruff: noqa' tape/framework_pb2.py
