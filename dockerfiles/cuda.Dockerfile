# The CUDA test image: the CUDA 13.4 devel toolkit (its ptxas accepts sm_107a, which
# Inductor's templates compile for on Rubin), the torch under test and accelkit.
#
# TORCH_CUDA_ARCH_LIST and INDUCTOR_CUDA_ARCH name the target `accelkit setup cuda --arch`
# asked for (10.7 and 107 for sm_107); the image keeps them in its environment so builds of
# extensions and Inductor's CUDA templates target it. TRITON_PTXAS is the ptxas triton must
# compile with (a link to the nvidia-cuda-nvcc wheel the install step adds for a target:
# triton's own ptxas, CUDA 13.3 in triton 3.8, does not know sm_107); both of triton's
# variables point at it. Build context: see cpu.Dockerfile.
ARG BASE_IMAGE=nvidia/cuda:13.4.0-devel-ubuntu24.04
FROM ${BASE_IMAGE}
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# The leg's Python comes from install-python.sh (see cpu.Dockerfile); on the Ubuntu-based
# nvidia/cuda images, Pythons other than 3.12 come from the deadsnakes PPA.
ARG PYTHON_VERSION=""
# 1 with `accelkit setup --torch-from-base`: the venv sees the base image's torch.
ARG SYSTEM_SITE_PACKAGES=""
COPY install-python.sh /tmp/install-python.sh
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
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
ARG TORCH_CUDA_ARCH_LIST=""
ARG INDUCTOR_CUDA_ARCH=""
ARG TRITON_PTXAS=""
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:/usr/local/cuda/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    CUDA_HOME=/usr/local/cuda \
    TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST} \
    ACCELKIT_INDUCTOR_CUDA_ARCH=${INDUCTOR_CUDA_ARCH} \
    TRITON_PTXAS_PATH=${TRITON_PTXAS} \
    TRITON_PTXAS_BLACKWELL_PATH=${TRITON_PTXAS}
WORKDIR /tmp
CMD ["accelkit", "doctor"]
