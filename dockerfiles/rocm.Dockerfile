# The ROCm builder: manylinux_2_28 (PyTorch's and TheRock's wheel base) with compilers, CMake,
# Ninja, ccache and a venv for the chosen Python. No ROCm here: `accelkit build rocm`
# installs TheRock's SDK from pip inside the build container (rocm[libraries,devel,...]).
#
# One stage. Build context (written by `accelkit build`): this Dockerfile and
# fetch_inputs.py; the host's pip settings come over HTTP (below). No BuildKit syntax.
ARG BASE_IMAGE=quay.io/pypa/manylinux_2_28_x86_64
FROM ${BASE_IMAGE}
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# manylinux: dnf, gcc-toolset and /opt/python are there; Debian/Ubuntu: apt.
# hadolint ignore=DL3008,DL3041
RUN if command -v dnf >/dev/null 2>&1; then \
        dnf install -y ccache git patchelf && dnf clean all; \
    elif command -v apt-get >/dev/null 2>&1; then \
        apt-get update \
        && apt-get install -y --no-install-recommends \
            ccache git patchelf g++ make python3-venv python3-dev ca-certificates \
        && rm -rf /var/lib/apt/lists/*; \
    fi
# The wheel's Python (3.13, or 3.13t: manylinux's free-threaded /opt/python/cp313-cp313t),
# checked once the venv exists: a build for another Python fails here, not at install time.
ARG PYTHON_VERSION=3.12
RUN tag="cp$(echo "${PYTHON_VERSION%t}" | tr -d .)"; \
    abi="${tag}"; case "${PYTHON_VERSION}" in *t) abi="${tag}t" ;; esac; \
    py="/opt/python/${tag}-${abi}/bin/python"; \
    if [ ! -x "$py" ]; then py="$(command -v "python${PYTHON_VERSION}" || true)"; fi; \
    if [ -z "$py" ]; then echo "no Python ${PYTHON_VERSION} in the base image" >&2; exit 1; fi; \
    "$py" -m venv /opt/venv \
    && /opt/venv/bin/python -c 'import sys, sysconfig; want = sys.argv[1]; have = "%d.%d" % sys.version_info[:2]; ft = bool(sysconfig.get_config_var("Py_GIL_DISABLED")); sys.exit(0 if (have, ft) == (want.rstrip("t"), want.endswith("t")) else "the builder venv has Python %s%s, not %s" % (have, "t" if ft else "", want))' "${PYTHON_VERSION}"

# The build tools, from the host's pip settings: accelkit serves them (pip.conf, ca.pem) on
# the host's loopback while the build runs, and this one RUN downloads them, installs and
# deletes them, so no layer holds them (see cpu.Dockerfile). ACCELKIT_INPUTS_URL changes
# with every build (never a cache hit) and is dead once the build is over (harmless in
# `docker history`).
COPY fetch_inputs.py /tmp/accelkit-fetch-inputs.py
ARG ACCELKIT_INPUTS_URL=""
# hadolint ignore=DL3013
RUN /opt/venv/bin/python -I /tmp/accelkit-fetch-inputs.py \
        "${ACCELKIT_INPUTS_URL}" /tmp/accelkit-pip \
    && PIP_CONFIG_FILE=/tmp/accelkit-pip/pip.conf /opt/venv/bin/python -m pip install \
        --no-cache-dir "setuptools>=70.1" wheel packaging cmake ninja \
    && rm -rf /tmp/accelkit-pip /tmp/accelkit-fetch-inputs.py
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1
WORKDIR /work
