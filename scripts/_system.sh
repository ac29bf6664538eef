# Sourced by scripts/check: the system packages the tests use, installed when missing.
# Debian's chromium for the browser tests (Playwright drives it; it never downloads a browser).
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing Debian's chromium for the browser tests"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
  else
    echo "note: chromium is not installed, so the browser tests will be skipped" \
         "(install it with: sudo apt-get install chromium fonts-dejavu-core)"
  fi
fi
