# The plain test image: a Python venv with the torch under test and accelkit. Serves the CPU
# and ROCm (whose runtime comes from pip: torch requires rocm[libraries]).
#
# Build context (written by `accelkit setup`): install.json, install.py, torch_source.py,
# install-python.sh, torch/ (a wheel, or nothing when torch comes from an index), accelkit/
# (accelkit's wheel), the requirement lists, and pip/ (the host's pip settings and CA bundle).
# pip/ is copied into the throw-away `install` stage only: the final image holds the venv,
# never the settings. No BuildKit syntax: the engine's classic builder builds this.
ARG BASE_IMAGE=ubuntu:24.04
FROM ${BASE_IMAGE} AS system
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# The leg's Python (`accelkit setup --python`; empty: the base image's python3) with venv and
# headers, and what Inductor compiles its CPU kernels with (a C++ compiler and Python's
# headers): the suite's compiled cases need them. install-python.sh checks the interpreter.
ARG PYTHON_VERSION=""
COPY install-python.sh /tmp/install-python.sh
# hadolint ignore=DL3008
RUN apt-get update \
    && sh /tmp/install-python.sh "${PYTHON_VERSION}" /opt/venv \
    && apt-get install -y --no-install-recommends g++ ca-certificates \
    && rm -rf /var/lib/apt/lists/* /tmp/install-python.sh

FROM system AS install
COPY . /tmp/accelkit-context/
RUN PIP_CONFIG_FILE=/tmp/accelkit-context/pip/pip.conf \
    /opt/venv/bin/python /tmp/accelkit-context/install.py /tmp/accelkit-context

FROM system
COPY --from=install /opt/venv /opt/venv
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1
WORKDIR /tmp
CMD ["accelkit", "doctor"]
