# Shared by scripts/serve and scripts/test: make a virtualenv in .venv with the project installed.
# Sourced, not run. Reinstalls only when pyproject.toml changed since the last install.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="$root/.venv"
extras="${NOTARY_EXTRAS:-}"
stamp="$venv/.installed${extras:+-$extras}"
py=${PYTHON:-python3}
if [ ! -x "$venv/bin/python" ]; then
  echo "[setup] creating virtualenv in .venv" >&2
  "$py" -m venv "$venv"
fi
if [ ! -f "$stamp" ] || [ "$root/pyproject.toml" -nt "$stamp" ]; then
  echo "[setup] installing dependencies (first run only)" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$root${extras:+[$extras]}" >&2
  touch "$stamp"
fi
export PATH="$venv/bin:$PATH"
