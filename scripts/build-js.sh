#!/usr/bin/env bash
# Build the widgets' front end: install the locked npm dependencies in js/ and bundle js/src
# into ipyagent/widgets/static (runtime.js, the views' loaders run_view.js and chat.js,
# ipyagent.css). Commit the result: the Python package ships the bundles, so users need no node.
#   scripts/build-js.sh            install + build
# Needs node >= 20 and npm; the build is reproducible (same sources + lockfile -> same bytes).
set -euo pipefail
cd "$(dirname "$0")/../js"
npm ci --no-audit --no-fund
sha256sum package-lock.json > node_modules/.ipyagent-lock
node build.mjs
