# Debian trixie with Debian's own torch (python3-torch, 2.6.0 for trixie's CPython 3.13):
# the torch of the cpu-py3.13 leg's rehearsal (`accelkit matrix run --base-image
# 3.13=accelkit-base:trixie-torch --torch-from-base 3.13`), because no CPU torch wheel for
# CPython 3.13 can be reached here (PyPI's is the CUDA build: a 6.4 GB image). .ci/run builds
# it FROM the local trixie base image with the host's network; no registry is used.
ARG BASE_IMAGE=accelkit-base:trixie
FROM ${BASE_IMAGE}
# libtorch-dev, one of python3-torch's Recommends, holds the ATen headers that Inductor's
# generated C++ includes: without it every compiled case fails to build its kernel.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3-torch libtorch-dev \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -c 'import torch; print("torch", torch.__version__, "in", torch.__file__)'
