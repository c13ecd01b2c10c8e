# The Intel XPU test image: Ubuntu 24.04 with Intel's GPU runtime (Level Zero loader and
# GPU driver, OpenCL ICD, the offline compiler), torch from PyTorch's XPU index (its
# dependencies bring the oneAPI runtime and triton-xpu) and accelkit.
#
# The oneAPI runtime reads SYCL_CACHE_PERSISTENT to keep compiled kernels between runs;
# graph capture (torch.xpu.XPUGraph) needs nothing else at run time. Build context: see
# cpu.Dockerfile (install.json names the index and torch).
ARG BASE_IMAGE=ubuntu:24.04
FROM ${BASE_IMAGE}
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# Ubuntu 24.04's universe carries Intel's compute runtime; Intel's own apt repository
# (repositories.intel.com/gpu) has newer ones: point BASE_IMAGE at an image with it.
# The leg's Python comes from install-python.sh (see cpu.Dockerfile).
ARG PYTHON_VERSION=""
# 1 with `accelkit setup --torch-from-base`: the venv sees the base image's torch.
ARG SYSTEM_SITE_PACKAGES=""
COPY install-python.sh /tmp/install-python.sh
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        ca-certificates \
        libze1 libze-intel-gpu1 intel-opencl-icd ocl-icd-libopencl1 \
    && sh /tmp/install-python.sh "${PYTHON_VERSION}" /opt/venv "${SYSTEM_SITE_PACKAGES}" \
    && rm -rf /var/lib/apt/lists/* /tmp/install-python.sh

# The install step (see cpu.Dockerfile): download the inputs accelkit serves for this build,
# install, delete them, all in one RUN. The URL changes with every build (never a cache
# hit) and is dead once the build is over (harmless in `docker history`).
COPY fetch_inputs.py /tmp/accelkit-fetch-inputs.py
ARG ACCELKIT_INPUTS_URL=""
RUN /opt/venv/bin/python -I /tmp/accelkit-fetch-inputs.py \
        "${ACCELKIT_INPUTS_URL}" /tmp/accelkit-context \
    && PIP_CONFIG_FILE=/tmp/accelkit-context/pip/pip.conf \
        /opt/venv/bin/python /tmp/accelkit-context/install.py /tmp/accelkit-context \
    && rm -rf /tmp/accelkit-context /tmp/accelkit-fetch-inputs.py
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    SYCL_CACHE_PERSISTENT=1
WORKDIR /tmp
CMD ["accelkit", "doctor"]
