# Sourced by scripts/pi-compat.sh and scripts/mcp-compat.sh (after they set
# repo): a mktemp -d folder $work removed on exit (with the fake model,
# $fake_pid, when one runs), npm's cache and every temp file inside it,
# and $pkgdir, where packages are installed: PI_COMPAT_CACHE=DIR keeps
# them between runs. The scripts install there with --save: npm removes
# from a folder what its package.json does not list, so each script's
# install took away the others' packages (pi-acp, pi 0.73, the MCP
# servers), and they were fetched again at every run.
work=$(mktemp -d)
fake_pid=
cleanup() {
  if [ -n "$fake_pid" ]; then kill "$fake_pid" 2>/dev/null || true; wait "$fake_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

export npm_config_cache="$work/npm-cache" npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
# Everything the clients, rpi and pi write to a temp dir (node's compile
# cache, pi's jiti cache, rpi's full-output files) stays in $work too.
mkdir -p "$work/tmp" && export TMPDIR="$work/tmp"

pkgdir=${PI_COMPAT_CACHE:-$work/pkgs}
mkdir -p "$pkgdir"
pkgdir=$(cd "$pkgdir" && pwd)
