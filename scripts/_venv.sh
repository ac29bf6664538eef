# Sourced by the scripts: make .venv (once) and install ipyagent into it with the given extras.
# The "local" extra brings the embedded model's runtime as a wheel (xllamacpp): nothing is
# compiled. scripts/install-llama-cpp.sh is the opt-in way to the llama-cpp-python backend.
# Re-running is cheap.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
extras="${1:-dev}"
venv="${IPYAGENT_VENV:-.venv}"
source "$root/scripts/_pip.sh"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  quiet_pip "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
fi
quiet_pip "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e ".[${extras}]"
case "$venv" in /*) ;; *) venv="$root/$venv" ;; esac
export PATH="$venv/bin:$PATH"
