# Shared by scripts/serve and scripts/test: make a virtualenv in .venv with the project installed.
# Sourced, not run. One stamp (.venv/.installed) records which extras are installed; a script
# reinstalls only when pyproject.toml changed since, or when it needs an extra not yet there
# (./scripts/serve after ./scripts/test installs nothing; the other way round, only the test
# extras are added).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="$root/.venv"
wanted="${NOTARY_EXTRAS:-}"
stamp="$venv/.installed"
py=${PYTHON:-python3}
if [ ! -x "$venv/bin/python" ]; then
  echo "[setup] creating virtualenv in .venv" >&2
  "$py" -m venv "$venv"
fi
have=""  # the extras installed last time (kept when reinstalling)
fresh=0
if [ -f "$stamp" ]; then
  have=$(cat "$stamp")
  [ "$root/pyproject.toml" -nt "$stamp" ] || fresh=1
fi
missing=0
for extra in ${wanted//,/ }; do
  case ",$have," in *",$extra,"*) ;; *) missing=1 ;; esac
done
if [ "$fresh" = 0 ] || [ "$missing" = 1 ]; then
  extras=$(printf '%s\n' ${have//,/ } ${wanted//,/ } | sort -u | paste -sd, -)
  echo "[setup] installing the project${extras:+ with [$extras]} into .venv" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$root${extras:+[$extras]}" >&2
  printf '%s' "$extras" > "$stamp"
  rm -f "$venv"/.installed-*  # stamps of earlier versions of this script
fi
export PATH="$venv/bin:$PATH"
