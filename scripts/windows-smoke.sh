#!/usr/bin/env bash
# The Windows build under wine (>= 9), run as a Windows user would run it:
# no HOME, USERPROFILE and TMP set by Windows, a project that ships its own
# .pi\agent\models.json, bash from Git for Windows, cmd /c.
#
#   bash scripts/windows-smoke.sh                  # build rpi.exe here and check it
#   bash scripts/windows-smoke.sh path/to/rpi.exe  # check that binary instead
#   bash scripts/windows-smoke.sh --install-wine   # install a wine >= 9 (below), then exit
#
# It prints each check, exits 1 if one fails, and exits 0 with "SKIP" when
# no wine >= 9 can be run here. Debian bookworm's own wine (8) cannot start
# Go >= 1.24 binaries; the wine used is either `wine` on PATH, if it is 9 or
# later, or Debian trixie's wine installed by --install-wine into a trixie
# root under /opt/rpi-wine/trixie (RPI_WINE_ROOT), run with chroot in a
# private mount namespace (so as root, with unshare). --install-wine needs
# only Debian's packages: debootstrap from bookworm, then trixie's
# wine inside that root; the system's own apt sources are not changed.
#
# Git for Windows cannot be installed here, so bash.exe is a stand-in built
# from Go below: `bash -c` with echo, sleep, exit, printenv. It is placed
# where Git for Windows installs its bash (C:\Program Files\Git\bin, with
# git.exe in Git\cmd, all its installer puts on PATH), and stand-ins for
# WSL's C:\windows\system32\bash.exe and the Microsoft Store's WindowsApps
# stub that print "wrong bash" if rpi ever runs them.
set -uo pipefail
cd "$(dirname "$0")/.."
root=${RPI_WINE_ROOT:-/opt/rpi-wine/trixie}

if [ "${1:-}" = --install-wine ]; then
  set -e
  command -v debootstrap >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap; }
  [ -x "$root/usr/bin/apt-get" ] || debootstrap --variant=minbase trixie "$root" http://deb.debian.org/debian
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  unshare -m sh -c "mount -t proc proc '$root/proc' && mount --rbind /dev '$root/dev' &&
    chroot '$root' sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends wine wine64 >/dev/null'"
  unshare -m sh -c "mount -t proc proc '$root/proc' && chroot '$root' wine --version"
  exit 0
fi

skip() { echo "SKIP: $*"; exit 0; }
wine_major() { sed -n 's/^wine-\([0-9]*\).*/\1/p'; }

mode=
if command -v wine >/dev/null && [ "$(wine --version 2>/dev/null | wine_major)" -ge 9 ] 2>/dev/null; then
  mode=native
  version=$(wine --version)
elif [ -x "$root/usr/bin/wine" ] || [ -L "$root/usr/bin/wine" ]; then # a link into the root
  [ "$(id -u)" = 0 ] && command -v unshare >/dev/null || skip "the wine in $root needs root and unshare to run"
  version=$(unshare -m sh -c "mount -t proc proc '$root/proc' && chroot '$root' wine --version" 2>/dev/null)
  [ "$(echo "$version" | wine_major)" -ge 9 ] 2>/dev/null || skip "the wine in $root does not run ($version)"
  mode=chroot
else
  installed=$(wine --version 2>/dev/null || echo none)
  skip "no wine >= 9 here (wine on PATH: $installed; none in $root). Install one with: bash scripts/windows-smoke.sh --install-wine"
fi
command -v jq >/dev/null || { echo "FAIL: jq is needed to read rpi's output"; exit 1; }

work=$(mktemp -d /tmp/rpi-windows-smoke.XXXXXX)
root_tmp=/tmp # where wine's Unix side keeps wineserver's socket
[ "$mode" = chroot ] && root_tmp=$root/tmp
failures=0
rpi_pid=
cleanup() {
  [ -n "$rpi_pid" ] && kill "$rpi_pid" 2>/dev/null
  if [ -d "$work/prefix" ]; then
    in_wine wineserver -k >/dev/null 2>&1
    # wineserver's socket folder, named after the prefix's device and inode
    local server
    server=$(printf 'server-%x-%x' "0x$(stat -c %D "$work/prefix")" "$(stat -c %i "$work/prefix")")
    for dir in "${root_tmp}"/wine-*/"$server" "${root_tmp}"/.wine-*/"$server"; do
      [ -d "$dir" ] && rm -rf "$dir" && rmdir "$(dirname "$dir")" 2>/dev/null
    done
  fi
  rm -rf "$work"
  [ "$mode" = chroot ] && rmdir "$root$work" 2>/dev/null
  return 0
}
trap cleanup EXIT

# in_wine runs a command in wine's world as a Windows user's program is
# run: an environment without HOME or TMPDIR, Windows' own variables
# (USERPROFILE, TMP, PATH from the registry, WINEPATH put first on it),
# plus the variables given as NAME=value before the command, in the
# folder $cwd (Z:\... to Windows).
cwd=
in_wine() {
  local path=/usr/bin:/bin
  [ "$mode" = native ] && path=$PATH
  local vars=(PATH="$path" WINEPREFIX="$work/prefix" WINEDEBUG=-all XDG_RUNTIME_DIR="$work/xdg"
    WINEDLLOVERRIDES="mscoree,mshtml=")
  while [[ $# -gt 0 && $1 == *=* ]]; do vars+=("$1"); shift; done
  if [ "$mode" = native ]; then
    (cd "${cwd:-$work}" && exec env -i "${vars[@]}" "$@")
  else
    mkdir -p "$root$work"
    unshare -m -- bash -c 'r=$1 w=$2 d=$3; shift 3
      mount -t proc proc "$r/proc" && mount --rbind /dev "$r/dev" && mount --bind "$w" "$r$w" &&
      exec chroot "$r" sh -c '\''cd "$0" && exec env -i "$@"'\'' "$d" "$@"' _ "$root" "$work" "${cwd:-$work}" "${vars[@]}" "$@"
  fi
}

# winpath is the Windows path of a Unix path under wine's Z: drive.
winpath() { echo "Z:${1//\//\\}"; }

pass() { echo "ok   $*"; }
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
check() { # check DESCRIPTION CONDITION...: runs the condition
  local what=$1
  shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}

echo "wine: $version ($mode)"
mkdir -p "$work/xdg" && chmod 700 "$work/xdg"

# ---- rpi.exe, the test binary and the stand-ins ----
exe=${1:-}
if [ -z "$exe" ]; then
  exe=$work/rpi.exe
  echo "building rpi.exe (CGO_ENABLED=0 GOOS=windows GOARCH=amd64)"
  CGO_ENABLED=0 GOOS=windows GOARCH=amd64 go build -o "$exe" . || { echo "FAIL: go build"; exit 1; }
  GOOS=windows GOARCH=amd64 go test -c -o "$work/rpi.test.exe" . || { echo "FAIL: go test -c"; exit 1; }
else
  exe=$(cd "$(dirname "$exe")" && pwd)/$(basename "$exe")
  cp "$exe" "$work/rpi.exe" && exe=$work/rpi.exe
fi
mkdir -p "$work/standin"
cat >"$work/standin/main.go" <<'EOF'
// A stand-in for Git for Windows' bash.exe: bash -c "echo WORDS; sleep S;
// exit N; printenv NAME". Run from System32 or WindowsApps, it is the
// wrong bash: it says so and exits 99.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	exe, _ := os.Executable()
	if l := strings.ToLower(exe); strings.Contains(l, `\system32\`) || strings.Contains(l, `\windowsapps\`) {
		fmt.Println("wrong bash:", exe)
		os.Exit(99)
	}
	if len(os.Args) != 3 || os.Args[1] != "-c" {
		fmt.Fprintln(os.Stderr, "stand-in bash: only -c COMMAND")
		os.Exit(2)
	}
	for _, command := range strings.Split(os.Args[2], ";") {
		f := strings.Fields(command)
		switch {
		case len(f) == 0:
		case f[0] == "echo":
			fmt.Println(strings.Join(f[1:], " "))
		case f[0] == "sleep" && len(f) == 2:
			s, _ := strconv.ParseFloat(f[1], 64)
			time.Sleep(time.Duration(s * float64(time.Second)))
		case f[0] == "exit" && len(f) == 2:
			n, _ := strconv.Atoi(f[1])
			os.Exit(n)
		case f[0] == "printenv" && len(f) == 2:
			fmt.Println(os.Getenv(f[1]))
		default:
			fmt.Fprintln(os.Stderr, "stand-in bash: not supported:", command)
			os.Exit(127)
		}
	}
}
EOF
(cd "$work/standin" && CGO_ENABLED=0 GOOS=windows GOARCH=amd64 go build -o bash.exe main.go) || { echo "FAIL: building the stand-in bash"; exit 1; }

# ---- the Windows user: a new wine prefix ----
in_wine wineboot -i >/dev/null 2>&1
profile_win=$(in_wine wine cmd /c 'echo %USERPROFILE%' 2>/dev/null | tr -d '\r')
profile=$work/prefix/drive_c/${profile_win#C:\\}
profile=${profile//\\//}
[ -d "$profile" ] || { echo "FAIL: no profile folder for $profile_win ($profile)"; exit 1; }
agent=$profile/.pi/agent
mkdir -p "$agent"
echo '{"providers":{"home":{"baseUrl":"http://127.0.0.1:9/v1","api":"openai-completions","models":[{"id":"h"}]}}}' >"$agent/models.json"
echo '{"defaultProvider":"home","defaultModel":"h"}' >"$agent/settings.json"
project=$work/project
mkdir -p "$project/.pi/agent"
echo '{"providers":{"repo":{"baseUrl":"http://127.0.0.1:9/v1","api":"openai-completions","apiKey":"$OPENAI_API_KEY","models":[{"id":"m"}]}}}' >"$project/.pi/agent/models.json"
echo '{"defaultProvider":"repo","defaultModel":"m"}' >"$project/.pi/agent/settings.json"
echo "USERPROFILE is $profile_win; the project is $(winpath "$project"), with its own .pi\\agent\\models.json"

# The variables of the user's rpi: a key (which must go nowhere near the
# project's server) and the offline model's answer.
user_vars=(OPENAI_API_KEY=sk-users-own-key PI_FAUX_RESPONSE="Hello from rpi on Windows")
rpi_in() { # rpi_in DIR ARGS...: rpi.exe started in DIR
  local cwd=$1
  shift
  in_wine "${user_vars[@]}" "${wine_path[@]}" wine "$exe" "$@"
}
wine_path=()

# ---- one rpi at a time, driven line by line ----
transcript=$work/transcript
start_rpi() { # start_rpi DIR ARGS...
  echo "== rpi.exe ${*:2}" >>"$transcript"
  coproc RPI { rpi_in "$@" 2>>"$work/stderr"; }
  rpi_pid=$RPI_PID
  local w=${RPI[1]} r=${RPI[0]}
  exec {rpi_in}>&"$w" {rpi_out}<&"$r"
  eval "exec $w>&- $r<&-"
}
send() { printf '%s\n' "$1" >&"$rpi_in"; echo "> $1" >>"$transcript"; }
# expect JQ_FILTER [SECONDS]: reads lines until one matches; it is in $got.
expect() {
  local filter=$1 deadline=$((SECONDS + ${2:-30})) line
  got=
  while ((SECONDS < deadline)); do
    IFS= read -r -t $((deadline - SECONDS + 1)) -u "$rpi_out" line || return 1
    line=${line%$'\r'}
    echo "< $line" >>"$transcript"
    if echo "$line" | jq -e "$filter" >/dev/null 2>&1; then
      got=$line
      return 0
    fi
  done
  return 1
}
field() { echo "$got" | jq -r "$1"; }
# end_rpi SECONDS: closes stdin; rpi must exit 0 within SECONDS.
end_rpi() {
  exec {rpi_in}>&-
  local deadline=$((SECONDS + $1))
  while kill -0 "$rpi_pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
  if kill -0 "$rpi_pid" 2>/dev/null; then
    kill "$rpi_pid"
    rpi_pid=
    return 1
  fi
  wait "$rpi_pid"
  local code=$?
  rpi_pid=
  exec {rpi_out}<&-
  return $code
}

# ---- the checks ----
echo "-- rpi.exe --help"
help=$(rpi_in "$work" --help 2>/dev/null | tr -d '\r')
check "--help names USERPROFILE, TMP and TEMP, not TMPDIR" \
  eval '[[ $help == *USERPROFILE* && $help == *"TMP, TEMP"* && $help != *TMPDIR* ]]'

if [ -f "$work/rpi.test.exe" ]; then
  echo "-- TestFindBashOnWindows, under wine"
  out=$(in_wine wine "$work/rpi.test.exe" -test.run '^TestFindBashOnWindows$' -test.v 2>&1 | tr -d '\r')
  check "TestFindBashOnWindows passes" eval '[[ $out == *"--- PASS: TestFindBashOnWindows"* ]]' || echo "$out"
fi

echo "-- started in the project, which ships .pi\\agent\\models.json"
out=$(rpi_in "$project" rpc --model repo/m </dev/null 2>/dev/null | tr -d '\r')
check "--model repo/m is unknown: the project's models.json is not read" \
  eval '[[ $out == *"\"command\":\"init\",\"success\":false,\"error\":\"Unknown model: repo/m"* ]]'

echo "-- rpi.exe rpc in the project, without bash: startup, get_state, bash, Git for Windows installed, process_spawn"
start_rpi "$project" rpc
check "startup: session_started" expect '.type == "session_started"'
send '{"id":"s","type":"get_state"}'
expect '.id == "s"'
model=$(field '"\(.data.model.provider)/\(.data.model.id)"')
check "get_state: the model is %USERPROFILE%'s settings.json default, home/h ($model)" test "$model" = home/h
session_file=$(field .data.sessionFile)
check "get_state: the session file is under %USERPROFILE%\\.pi\\agent\\sessions ($session_file)" \
  eval '[[ ${session_file,,} == "${profile_win,,}\\.pi\\agent\\sessions\\"* ]]'
send '{"id":"b0","type":"bash","command":"echo hi"}'
expect '.id == "b0"'
check "bash without Git for Windows fails, saying to install it: $(field .error)" \
  eval '[[ $(field .success) == false && $(field .error) == *"install Git for Windows"* ]]'
pf=$work/prefix/drive_c/Program\ Files/Git
mkdir -p "$pf/bin" "$pf/cmd" "$profile/AppData/Local/Microsoft/WindowsApps"
cp "$work/standin/bash.exe" "$pf/bin/bash.exe"
cp "$work/standin/bash.exe" "$pf/cmd/git.exe"
cp "$work/standin/bash.exe" "$work/prefix/drive_c/windows/system32/bash.exe"
cp "$work/standin/bash.exe" "$profile/AppData/Local/Microsoft/WindowsApps/bash.exe"
send '{"id":"b1a","type":"bash","command":"echo found"}'
expect '.id == "b1a"'
check "bash once Git for Windows is installed (in C:\Program Files\Git, not on PATH): $(field .data.output | tr '\n' ' ')" \
  eval '[[ $(field .data.output) == found* ]]'
spawn=$(jq -nc --arg cwd "$(winpath "$project")" '{id:"ps",type:"process_spawn",spec:{argv:["cmd","/c","echo spawned"],cwd:$cwd}}')
send "$spawn"
expect '.type == "process_exited"'
check "process_spawn cmd /c: exits 0 ($(field .data.process.state), exitCode $(field .data.process.exitCode))" \
  eval '[[ $(field .data.process.exitCode) == 0 ]]'
send "{\"id\":\"pl\",\"type\":\"process_logs\",\"processId\":\"$(field .data.process.id)\"}"
expect '.id == "pl"'
check "process_spawn cmd /c: its output is \"spawned\"" \
  eval '[[ $(field ".data.chunks[0].dataBase64" | base64 -d | tr -d "\r") == spawned ]]'
check "EOF: rpi.exe exits 0" end_rpi 15

echo "-- rpi.exe rpc --model faux/faux-1, with Git\\cmd, WSL's bash and the Store's stub on PATH"
wine_path=("WINEPATH=$profile_win\\AppData\\Local\\Microsoft\\WindowsApps;C:\\Program Files\\Git\\cmd")
start_rpi "$project" rpc --model faux/faux-1
check "startup: session_started" expect '.type == "session_started"'
send '{"id":"p","type":"prompt","message":"Say hello"}'
check "prompt: agent_settled" expect '.type == "agent_settled"'
send '{"id":"t","type":"get_last_assistant_text"}'
expect '.id == "t"'
check "the faux model answered: $(field .data.text)" eval '[[ $(field .data.text) == "Hello from rpi on Windows" ]]'
send '{"id":"b1","type":"bash","command":"echo hello from bash; printenv OPENAI_API_KEY; exit 3"}'
expect '.id == "b1"' 20
check "bash runs Git for Windows' bash: $(field .data.output | tr '\n' ' ')" \
  eval '[[ $(field .data.output) == "hello from bash"* && $(field .data.exitCode) == 3 ]]'
check "bash: the child has no provider key" eval '[[ $(field .data.output) != *sk-users-own-key* ]]'
send '{"id":"b2","type":"bash","command":"echo begun; sleep 60","timeout":1}'
expect '.id == "b2"' 20
check "bash killed by its timeout: exitCode $(field .data.exitCode), cancelled $(field .data.cancelled)" \
  eval '[[ $(field .data.exitCode) == null && $(field .data.cancelled) == true ]]'
send '{"id":"b3","type":"bash","command":"echo begun; sleep 60"}'
expect '.type == "bash_execution_update" and .data.requestId == "b3"' 20
send '{"id":"a","type":"abort_bash"}'
expect '.id == "b3"' 20
check "bash killed by abort_bash: exitCode $(field .data.exitCode), cancelled $(field .data.cancelled)" \
  eval '[[ $(field .data.exitCode) == null && $(field .data.cancelled) == true ]]'
send '{"id":"s","type":"get_state"}'
expect '.id == "s"'
session_file=$(field .data.sessionFile)
check "EOF: rpi.exe exits 0" end_rpi 15
unix_session=$profile/${session_file:${#profile_win}+1}
unix_session=${unix_session//\\//}
check "the session was written under %USERPROFILE%\\.pi\\agent: $session_file" \
  eval '[[ -s $unix_session ]] && grep -q "Hello from rpi on Windows" "$unix_session"'
check "nothing was written in the project's .pi\\agent" eval '[[ ! -e $project/.pi/agent/sessions ]]'

echo "-- rpi.exe acp"
start_rpi "$project" acp
send '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}'
check "initialize: protocolVersion 1, agent rpi" expect '.id == 0 and .result.protocolVersion == 1 and .result.agentInfo.name == "rpi"'
send "$(jq -nc --arg cwd "$(winpath "$project")" '{jsonrpc:"2.0",id:1,method:"session/new",params:{cwd:$cwd,mcpServers:[]}}')"
check "session/new: a sessionId" expect '.id == 1 and (.result.sessionId | length) > 0'
check "EOF: rpi.exe acp exits 0" end_rpi 15

if ((failures > 0)); then
  echo "--- the last 80 lines rpi read and wrote:"
  tail -n 80 "$transcript"
  echo "--- stderr:"
  cat "$work/stderr"
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"
