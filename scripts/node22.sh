# Sourced by scripts/pi-compat.sh and scripts/bench-pi.sh: sets nodebin to
# a folder holding node >= 22.19 (what pi 1.6 needs): the machine's node
# when it is recent enough, else node 22 fetched from npm into $pkgdir.
node_ok() { command -v node >/dev/null && node -e '
  const [a, b] = process.versions.node.split(".").map(Number);
  process.exit(a > 22 || (a === 22 && b >= 19) ? 0 : 1)'; }
if node_ok; then
  nodebin=$(dirname "$(command -v node)")
else
  case "$(uname -m)" in x86_64|amd64) arch=x64 ;; aarch64|arm64) arch=arm64 ;; *) arch=$(uname -m) ;; esac
  os=$(uname -s | tr '[:upper:]' '[:lower:]')
  if [ ! -x "$pkgdir/node22/package/bin/node" ]; then
    echo "node $(node --version 2>/dev/null || echo missing) is older than 22.19: fetching node-$os-$arch@22.23.5 ..."
    mkdir -p "$pkgdir/node22"
    (cd "$pkgdir/node22" && npm pack --silent "node-$os-$arch@22.23.5" >/dev/null && tar xzf node-"$os"-"$arch"-22.23.5.tgz && rm -f ./*.tgz)
  fi
  nodebin="$pkgdir/node22/package/bin"
fi
