#!/usr/bin/env bash
# deploy/systemd/stoker-server.service, checked as far as a machine without
# systemd as PID 1 allows:
#   - `systemd-analyze verify` is clean (ExecStart pointed at the built binary,
#     as verify requires the program to exist; nothing else is changed);
#   - `systemd-analyze security --offline` exposure is reported and at most
#     MAX_EXPOSURE (the unit is hardened: DynamicUser, ProtectSystem=strict, ...);
#   - every variable ExecStart uses is set in stoker-server.env, and the server
#     starts with exactly the flags the unit would give it (expanded from the
#     env file, data root and ports swapped for a temporary directory and
#     free ports on 127.0.0.1) and answers on its metrics port;
#   - a unit with a typo is refused by verify (the check is live).
# Starting the unit itself needs systemd as PID 1 and is not done here.
# Usage: deploy_systemd_test.sh REPO_ROOT SERVER_BIN
set -uo pipefail
root=$(cd "$1" && pwd) server=$(realpath "$2")
unit=$root/deploy/systemd/stoker-server.service env=$root/deploy/systemd/stoker-server.env
MAX_EXPOSURE=2.0
command -v systemd-analyze >/dev/null || { echo "FAIL: systemd-analyze is missing (Debian's systemd package)"; exit 1; }
work=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
passed=0 failed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }
fail() { echo "FAIL: $1"; [ -n "${2:-}" ] && echo "$2"; failed=$((failed + 1)); }

mkdir -p "$work/units"
sed "s#/usr/local/bin/stoker-server#$server#" "$unit" > "$work/units/stoker-server.service"
if out=$(systemd-analyze verify "$work/units/stoker-server.service" 2>&1) && [ -z "$out" ]; then
  ok "systemd-analyze verify is clean"
else
  fail "systemd-analyze verify" "$out"
fi
sec=$(systemd-analyze security --offline=true "$work/units/stoker-server.service" 2>&1)
exposure=$(echo "$sec" | sed -n 's/.*Overall exposure level for stoker-server.service: \([0-9.]*\).*/\1/p')
echo "systemd-analyze security: overall exposure ${exposure:-?} (0 = most hardened, 10 = not at all)"
echo "$sec" | grep '^✗' | sed 's/^/  still exposed: /' | head -20
if [ -n "$exposure" ] && awk "BEGIN{exit !($exposure <= $MAX_EXPOSURE)}"; then
  ok "security exposure $exposure <= $MAX_EXPOSURE"
else
  fail "security exposure ${exposure:-unknown} > $MAX_EXPOSURE" "$sec"
fi
for d in DynamicUser=yes ProtectSystem=strict ReadOnlyPaths=/srv/stoker NoNewPrivileges=yes PrivateTmp=yes MemoryMax= CPUQuota=; do
  grep -q "^$d" "$unit" && ok "unit sets $d" || fail "unit does not set $d"
done

# The flags the unit gives, from the env file.
set -a; . "$env"; set +a
exec_line=$(sed -n '/^ExecStart=/,/[^\\]$/p' "$unit" | tr -d '\\\n' | sed 's/^ExecStart=//')
vars=$(echo "$exec_line" | grep -o '\${\?[A-Z_]*}\?' | tr -d '${}' | sort -u)
for v in $vars; do
  grep -q "^$v=" "$env" && ok "env file sets $v" || fail "ExecStart uses \$$v, which the env file does not set"
done
expanded=$(eval echo "$exec_line")
read -r -a argv <<< "$expanded"
args=()
for a in "${argv[@]:1}"; do
  case "$a" in
    --data-root=*) args+=("--data-root=$work");;
    --port=*) args+=("--port=0");;
    --metrics-port=*) args+=("--metrics-port=0");;
    *) args+=("$a");;
  esac
done
echo "starting: stoker-server ${args[*]} --host=127.0.0.1"
"$server" "${args[@]}" --host=127.0.0.1 > "$work/server.out" 2> "$work/server.err" &
pid=$!
mport=
for _ in $(seq 100); do
  mport=$(sed -n 's/.*metrics on [0-9.]*:\([0-9]*\).*/\1/p' "$work/server.out" | head -1)
  [ -n "$mport" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
metrics=$( [ -n "$mport" ] && curl -sf "http://127.0.0.1:$mport/metrics")
if grep -q "^stoker_server_workers $STOKER_WORKERS\$" <<< "$metrics"; then
  ok "stoker-server runs with the unit's flags ($STOKER_WORKERS workers)"
else
  fail "stoker-server with the unit's flags" "$(tail -5 "$work/server.err")"
fi
# stoker-health (installed beside it; the container's health check) asks the
# gRPC health service: 0 serving, 2 no answer.
health=$(dirname "$server")/../tools/stoker-health
gport=$(sed -n 's/.*listening on [0-9.]*:\([0-9]*\).*/\1/p' "$work/server.out" | head -1)
if out=$("$health" --addr="127.0.0.1:$gport" 2>&1) && [ "$out" = "127.0.0.1:$gport: SERVING" ]; then
  ok "stoker-health says SERVING (exit 0)"
else
  fail "stoker-health against the server" "$out"
fi
kill -TERM "$pid" && wait "$pid"; rc=$?
pid=
[ "$rc" -eq 0 ] && ok "SIGTERM (the unit's KillSignal) stops it cleanly" || fail "exit status $rc after SIGTERM"
"$health" --addr="127.0.0.1:$gport" --timeout-seconds=1 >/dev/null 2>&1; rc=$?
[ "$rc" -eq 2 ] && ok "stoker-health exits 2 once the server is gone" || fail "stoker-health exit $rc with no server"

# The security drop-in (stoker-server.service.d/security.conf): verify takes
# it with the unit, and the server starts with its flags, the credentials
# directory (%d) being a temporary one with certificates made by openssl.
dropin=$root/deploy/systemd/stoker-server.service.d/security.conf
mkdir -p "$work/units/stoker-server.service.d"
sed "s#/usr/local/bin/stoker-server#$server#" "$dropin" > "$work/units/stoker-server.service.d/security.conf"
if out=$(systemd-analyze verify "$work/units/stoker-server.service" 2>&1) && [ -z "$out" ]; then
  ok "systemd-analyze verify is clean with the security drop-in"
else
  fail "systemd-analyze verify with the security drop-in" "$out"
fi
sed 's/^LoadCredential=/LoadCredentail=/' "$dropin" > "$work/units/stoker-server.service.d/security.conf"
out=$(systemd-analyze verify "$work/units/stoker-server.service" 2>&1)
grep -q "LoadCredentail" <<< "$out" && ok "verify reads the drop-in (a misspelt directive in it is reported)" \
  || fail "verify did not read the drop-in" "$out"
rm -r "$work/units/stoker-server.service.d"
cred=$work/credentials
mkdir -p "$cred"
(cd "$cred" &&
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out client-ca.crt \
    -days 2 -subj "/CN=test ca" &&
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout tls.key -out tls.csr -subj "/CN=localhost" &&
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > san.ext &&
  openssl x509 -req -in tls.csr -CA client-ca.crt -CAkey ca.key -CAcreateserial -out tls.crt -days 2 -extfile san.ext &&
  cp tls.crt probe.crt && cp tls.key probe.key &&
  head -c 24 /dev/urandom | base64 > tokens && echo "prometheus:$(head -c 18 /dev/urandom | base64)" > metrics-users
) >/dev/null 2>&1 || fail "openssl could not make the test certificates"
dexec=$(sed -n '/^ExecStart=./,/[^\\]$/p' "$dropin" | tr -d '\\\n' | sed 's/^ExecStart=//')
dexpanded=$(eval echo "${dexec//%d/$cred}")
read -r -a dargv <<< "$dexpanded"
dargs=()
for a in "${dargv[@]:1}"; do
  case "$a" in
    --data-root=*) dargs+=("--data-root=$work");;
    --port=*) dargs+=("--port=0");;
    --metrics-port=*) dargs+=("--metrics-port=-1");;
    *) dargs+=("$a");;
  esac
done
"$server" "${dargs[@]}" --host=127.0.0.1 > "$work/secure.out" 2> "$work/secure.err" &
pid=$!
for _ in $(seq 100); do grep -q "listening on" "$work/secure.out" && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
gport=$(sed -n 's/.*listening on [0-9.]*:\([0-9]*\).*/\1/p' "$work/secure.out" | head -1)
out=$([ -n "$gport" ] && "$health" --addr="127.0.0.1:$gport" --tls-ca="$cred/client-ca.crt" --tls-cert="$cred/probe.crt" \
  --tls-key="$cred/probe.key" 2>&1)
if [ "$out" = "127.0.0.1:$gport: SERVING" ] && grep -q "mutual TLS" "$work/secure.err" && grep -q "token authentication on" "$work/secure.err"; then
  ok "stoker-server runs with the drop-in's flags (mutual TLS, tokens, metrics auth); stoker-health over TLS: SERVING"
else
  fail "stoker-server with the drop-in's flags" "$out $(tail -5 "$work/secure.err")"
fi
kill -TERM "$pid" && wait "$pid"
pid=

sed 's/^ProtectSystem=strict/ProtectSistem=strict/' "$work/units/stoker-server.service" > "$work/units/typo.service"
out=$(systemd-analyze verify "$work/units/typo.service" 2>&1)
if grep -q "ProtectSistem" <<< "$out"; then
  ok "a unit with a misspelt directive is reported by verify (the check is live)"
else
  fail "verify did not report a misspelt directive"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
