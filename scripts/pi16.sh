# Sourced by scripts/bench-pi.sh and scripts/pi-edit-compare.sh, after they
# made $work: sets pkgdir (PI_COMPAT_CACHE, else $work/pkgs) holding pi 1.6,
# installing it there when it is not, and pi16 (its package folder).
export npm_config_cache="$work/npm-cache" npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
mkdir -p "$work/tmp" && export TMPDIR="$work/tmp"

pkgdir=${PI_COMPAT_CACHE:-$work/pkgs}
mkdir -p "$pkgdir"
pkgdir=$(cd "$pkgdir" && pwd)
if [ ! -f "$pkgdir/node_modules/@earendil-works/pi-coding-agent/package.json" ]; then
  echo "installing pi 1.6.0 ..."
  npm install --prefix "$pkgdir" --save --ignore-scripts --loglevel=error @earendil-works/pi-coding-agent@1.6.0 >/dev/null
fi
pi16="$pkgdir/node_modules/@earendil-works/pi-coding-agent"
