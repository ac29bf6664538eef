#!/usr/bin/env bash
# Check the front ends: run the node tests (js/test, labext/test), then rebuild into a temporary
# folder and fail if the widget bundles committed in ipyagent/widgets/static or the JupyterLab
# extension committed in ipyagent/labextension differ from that build.
# Installs the locked npm dependencies first when node_modules is missing or stale.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root/js"
if ! sha256sum --check --status node_modules/.ipyagent-lock 2>/dev/null; then
  npm ci --no-audit --no-fund
  sha256sum package-lock.json > node_modules/.ipyagent-lock
fi
echo "== node --test (js/test)"
node --test --test-reporter=spec
echo "== bundles in ipyagent/widgets/static match a fresh build"
fresh="$(mktemp -d)"
trap 'rm -rf "$fresh"' EXIT
node build.mjs --outdir "$fresh" > /dev/null
stale=0
for path in "$fresh"/*; do
  name="$(basename "$path")"
  if ! cmp --silent "$path" "$root/ipyagent/widgets/static/$name"; then
    echo "ipyagent/widgets/static/$name differs from a fresh build of js/src" >&2
    stale=1
  fi
done
if [ "$stale" = 1 ]; then
  echo "The committed bundles are stale: run scripts/build-js.sh and commit ipyagent/widgets/static." >&2
  exit 1
fi
echo "ok: bundles are up to date"
echo "== node --test (labext/test)"
(cd "$root/labext" && node --test --test-reporter=spec)
echo "== the JupyterLab extension in ipyagent/labextension matches a fresh build of labext/"
bash "$root/scripts/build-labext.sh" "$fresh/labextension" > /dev/null
if ! diff -r "$fresh/labextension" "$root/ipyagent/labextension" >&2; then
  echo "The committed extension is stale: run scripts/build-labext.sh and commit ipyagent/labextension." >&2
  exit 1
fi
echo "ok: the extension is up to date"
