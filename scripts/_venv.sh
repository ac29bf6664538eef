# Sourced by the scripts: make .venv (once) and install ipyagent into it with the given extras.
# With the "local" extra, the portable llama-cpp-python build goes in first, so that pip keeps it
# instead of compiling the default build, which crashes on some CPUs. Re-running is cheap.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
extras="${1:-dev}"
venv="${IPYAGENT_VENV:-.venv}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip 2>&1 \
    | grep -v "^WARNING: Location" || true
fi
case ",$extras," in
  *,local,*) bash scripts/install-llama-cpp.sh "$venv/bin/python" ;;
esac
# pip prints "Location ... is ignored" for index mirrors that are not present; that is noise.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e ".[${extras}]" 2>&1 \
  | grep -v "^WARNING: Location" || true
export PATH="$root/$venv/bin:$PATH"
