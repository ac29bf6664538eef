# Sourced by the scripts: make .venv (once) and install ipyagent into it with the given extras.
# With the "local" extra, the portable llama-cpp-python build goes in first, so that pip keeps it
# instead of compiling the default build, which crashes on some CPUs. Re-running is cheap.
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
case ",$extras," in
  *,local,*) bash scripts/install-llama-cpp.sh "$venv/bin/python" ;;
esac
quiet_pip "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e ".[${extras}]"
case "$venv" in /*) ;; *) venv="$root/$venv" ;; esac
export PATH="$venv/bin:$PATH"
