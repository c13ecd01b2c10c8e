# The plain test image: a Python venv with the torch under test and accelkit. Serves the CPU
# and ROCm (whose runtime comes from pip: torch requires rocm[libraries]).
#
# One stage, the venv written once. The build context (written by `accelkit setup`) holds
# only this Dockerfile, install-python.sh and fetch_inputs.py. The install inputs
# (install.json, install.py, torch_source.py, torch/: a wheel or nothing when torch comes
# from an index, accelkit/: accelkit's wheel, the requirement lists, and pip/: the host's
# pip settings and CA bundle) are served by accelkit over HTTP on the host's loopback while
# the build runs (accelkit/containers/build_inputs.py; builds use the host's network): the
# install RUN downloads them, installs and deletes them, so no layer holds the settings or
# the torch wheel. No BuildKit syntax: the engine's classic builder builds this.
ARG BASE_IMAGE=ubuntu:24.04
FROM ${BASE_IMAGE}
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# The leg's Python (`accelkit setup --python`; empty: the base image's python3) with venv and
# headers, and what Inductor compiles its CPU kernels with (a C++ compiler and Python's
# headers): the suite's compiled cases need them. install-python.sh checks the interpreter.
ARG PYTHON_VERSION=""
# 1 with `accelkit setup --torch-from-base`: the venv sees the base image's torch.
ARG SYSTEM_SITE_PACKAGES=""
COPY install-python.sh /tmp/install-python.sh
# hadolint ignore=DL3008
RUN apt-get update \
    && sh /tmp/install-python.sh "${PYTHON_VERSION}" /opt/venv "${SYSTEM_SITE_PACKAGES}" \
    && apt-get install -y --no-install-recommends g++ ca-certificates \
    && rm -rf /var/lib/apt/lists/* /tmp/install-python.sh

# The install step. ACCELKIT_INPUTS_URL (http://127.0.0.1:PORT/RANDOM/) changes with every
# build, so the build cache never reuses this RUN (setup reuses whole images by their
# content tag instead); it shows in `docker history`, where it is harmless: nothing answers
# there once the build is over. A failed download fails the build with one line.
COPY fetch_inputs.py /tmp/accelkit-fetch-inputs.py
ARG ACCELKIT_INPUTS_URL=""
RUN /opt/venv/bin/python -I /tmp/accelkit-fetch-inputs.py \
        "${ACCELKIT_INPUTS_URL}" /tmp/accelkit-context \
    && PIP_CONFIG_FILE=/tmp/accelkit-context/pip/pip.conf \
        /opt/venv/bin/python /tmp/accelkit-context/install.py /tmp/accelkit-context \
    && rm -rf /tmp/accelkit-context /tmp/accelkit-fetch-inputs.py
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1
WORKDIR /tmp
CMD ["accelkit", "doctor"]
