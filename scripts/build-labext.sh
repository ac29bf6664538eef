#!/usr/bin/env bash
# Build ipyagent's JupyterLab 4 / Notebook 7 extension (labext/) into ipyagent/labextension, the
# prebuilt extension the wheel installs into share/jupyter/labextensions/ipyagent. Commit the
# result: users need no node.
#   scripts/build-labext.sh           install the locked npm dependencies if stale, then build
#   scripts/build-labext.sh DIR       build into DIR instead (scripts/check-js.sh compares)
# The build is reproducible: same sources + lockfile -> same bytes, in any folder. JupyterLab's
# core metadata (which packages the page shares) comes from the locked @jupyterlab/core-meta,
# not from whatever jupyterlab is installed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root/labext"
if ! sha256sum --check --status node_modules/.ipyagent-lock 2>/dev/null; then
  npm ci --no-audit --no-fund --ignore-scripts
  sha256sum package-lock.json > node_modules/.ipyagent-lock
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# The builder wants a folder whose package.json is the core metadata.
mkdir "$work/core"
cp node_modules/@jupyterlab/core-meta/core.package.json "$work/core/package.json"
builder="$root/labext/node_modules/@jupyterlab/builder/lib/build-labextension.js"
if [ $# = 0 ]; then
  node "$builder" --core-path "$work/core" . > "$work/log" 2>&1 || { cat "$work/log" >&2; exit 1; }
  out="$root/ipyagent/labextension"
else
  # The output folder is named in package.json (../ipyagent/labextension): build a copy of the
  # sources in a scratch tree, then move its output to DIR.
  mkdir -p "$work/tree/labext"
  cp -r package.json webpack.config.cjs src "$work/tree/labext/"
  ln -s "$root/labext/node_modules" "$work/tree/labext/node_modules"
  (cd "$work/tree/labext" && node "$builder" --core-path "$work/core" . > "$work/log" 2>&1) \
    || { cat "$work/log" >&2; exit 1; }
  out="$1"
  rm -rf "$out"
  mkdir -p "$(dirname "$out")"
  mv "$work/tree/ipyagent/labextension" "$out"
fi
(cd "$out" && find . -type f | sort | while read -r f; do printf '%s  %s\n' "$(du -k "$f" | cut -f1)K" "$f"; done)
