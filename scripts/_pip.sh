# Sourced by the scripts: `quiet_pip COMMAND...` runs a pip command without the "Location ... is
# ignored" warnings pip prints for index mirrors that are not there, and fails when pip fails
# (a filter that swallowed pip's exit status would hide a missing install step).
quiet_pip() {
  "$@" 2>&1 | { grep -v "^WARNING: Location" || true; }
  return "${PIPESTATUS[0]}"
}
