# Sourced by scripts/test: the Debian packages the tests need, installed in one apt-get step:
# PostgreSQL server binaries for the throwaway clusters, Chromium for the browser tests
# (unless NOTARY_SKIP_JS=1; CHROMIUM_PATH names another binary), and Go with Debian's
# golang.org/x/mod for the test that opens our checkpoints with Go's note package, promtool
# (Debian's prometheus package) for the example alert rules and systemd-analyze for the example
# systemd unit. Installed when missing and
# running as root (as CI does); otherwise the missing piece is named and the run stops: never a
# silent skip.
need=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 \
  || [ -n "${NOTARY_PG_BIN:-}" ] || need+=(postgresql)
if [ "${NOTARY_SKIP_JS:-0}" != 1 ] && [ ! -x "${CHROMIUM_PATH:-/usr/bin/chromium}" ]; then
  need+=(chromium)
fi
command -v go >/dev/null 2>&1 || need+=(golang-go)
[ -d /usr/share/gocode/src/golang.org/x/mod/sumdb/note ] || need+=(golang-golang-x-mod-dev)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "[setup] installing Debian packages: ${need[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
  else
    echo "error: the tests need these Debian packages: ${need[*]}" >&2
    echo "       install them (sudo apt-get install ${need[*]}) or run ./scripts/test as root;" >&2
    echo "       or set NOTARY_PG_BIN / CHROMIUM_PATH (NOTARY_SKIP_JS=1 skips the browser tests)" >&2
    exit 2
  fi
fi
