# Sourced by the scripts: make .venv (once) and install ipyagent into it with the given extras.
# Re-running is cheap: pip only checks what is already there.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
extras="${1:-dev}"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
fi
# pip prints "Location ... is ignored" for index mirrors that are not present; that is noise.
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[${extras}]" 2>&1 \
  | grep -v "^WARNING: Location" || true
export PATH="$root/.venv/bin:$PATH"
