#!/bin/sh
# Makes the venv VENV with CPython VERSION in a test image's system stage
# (dockerfiles/{cpu,cuda,xpu}.Dockerfile), then checks what it made:
#
#     sh install-python.sh VERSION VENV [SYSTEM_SITE]
#
# VERSION is a matrix leg's Python as accelkit spells it (`accelkit setup --python`): 3.13,
# or 3.13t for the free-threaded build. Empty means the base image's python3, with its
# venv and headers from the distribution (what the images did before --python).
#
# Where the interpreter comes from, in order:
#   1. the base image's package sources (Debian, Ubuntu): python3.X, python3.X-venv and
#      python3.X-dev; the free-threaded build as python3.X-nogil (deadsnakes' name: Debian
#      packages no free-threaded interpreter);
#   2. on Ubuntu, when its archive lacks that Python, the deadsnakes PPA, as the CUDA
#      images of vLLM and SGLang do (the nvidia/cuda images are Ubuntu's);
#   3. an interpreter the base image already has on PATH (python3.X, python3.Xt).
# A base image made for the leg's Python (Debian bookworm: 3.11, trixie: 3.13) takes the
# first way without any extra source. Runs after `apt-get update`; needs network for apt.
#
# SYSTEM_SITE 1 makes the venv with --system-site-packages (`accelkit setup --torch-from-base`:
# the torch under test is the base image's, in the interpreter's own site-packages).
#
# The venv's interpreter must then report VERSION: its major.minor, and for a `t` a build
# with Py_GIL_DISABLED and the GIL off. Anything else fails the image build with one line.
set -eu

version="${1-}"
venv="${2:?usage: install-python.sh VERSION VENV [SYSTEM_SITE]}"
system_site="${3-}"

fail() {
    printf 'install-python.sh: %s\n' "$*" >&2
    exit 1
}

case "$version" in
    "")
        exe=python3
        packages="python3 python3-venv python3-dev"
        ;;
    3.[0-9] | 3.[0-9][0-9])
        exe="python$version"
        packages="python$version python$version-venv python$version-dev"
        ;;
    3.[0-9]t | 3.[0-9][0-9]t)
        minor="${version%t}"
        exe="python$version"
        packages="python$minor-nogil python$minor-dev"
        ;;
    *)
        fail "malformed Python version '$version' (expected 3.X or 3.Xt)"
        ;;
esac
first="${packages%% *}"

has_candidate() {
    apt-cache policy "$1" 2>/dev/null | grep -q 'Candidate: [0-9]'
}

if command -v apt-get >/dev/null 2>&1; then
    if ! has_candidate "$first" && grep -qs '^ID=ubuntu' /etc/os-release; then
        echo "install-python.sh: $first is not in Ubuntu's archive here: adding the deadsnakes PPA"
        apt-get install -y --no-install-recommends software-properties-common gpg-agent
        add-apt-repository -y ppa:deadsnakes/ppa
        apt-get update
    fi
    if has_candidate "$first"; then
        # shellcheck disable=SC2086 # a list of package names, split on purpose
        apt-get install -y --no-install-recommends $packages
    fi
fi

if ! command -v "$exe" >/dev/null 2>&1; then
    fail "Python ${version:-3} is neither in this base image nor in its package sources ($first); use a base image that has it (Debian trixie: 3.13, bookworm: 3.11, Ubuntu 24.04: 3.12)"
fi

case "$system_site" in
    "" | 0) "$exe" -m venv "$venv" ;;
    1) "$exe" -m venv --system-site-packages "$venv" ;;
    *) fail "SYSTEM_SITE must be 1, 0 or empty, not '$system_site'" ;;
esac

"$venv/bin/python" - "$version" <<'PY'
import sys
import sysconfig

wanted = sys.argv[1]
have = "%d.%d" % sys.version_info[:2]
free_threaded = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
gil = getattr(sys, "_is_gil_enabled", lambda: True)()
problem = None
if wanted and have != wanted.rstrip("t"):
    problem = "the venv has Python %s, not %s" % (sys.version.split()[0], wanted)
elif wanted.endswith("t") and not (free_threaded and not gil):
    problem = "Python %s is not free-threaded (Py_GIL_DISABLED=%s, GIL enabled: %s)" % (
        have, free_threaded, gil)
elif wanted and not wanted.endswith("t") and free_threaded:
    problem = "Python %s is the free-threaded build, not %s" % (have, wanted)
if problem:
    sys.exit("install-python.sh: " + problem)
print("install-python.sh: Python %s%s in %s" % (
    sys.version.split()[0], " (free-threaded)" if free_threaded else "", sys.prefix))
PY
