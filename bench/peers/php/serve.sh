#!/usr/bin/env bash
# The PHP metadata peer as compare runs it (runtime `php`): metadata.php in php-fpm 8.2 (OPcache on) behind
# nginx, both started here with configuration written into a private temp dir in TMPDIR (removed at exit; a
# SIGKILL leaves it, which is why compare gives each server a TMPDIR inside its own work dir).
#
# Environment:
#   METADATA_PORT      port nginx listens on (default 3001; 1..65535: nginx cannot report a port 0 chose)
#   METADATA_HOSTNAME  address to listen on (default 127.0.0.1)
#   METADATA_DB        the SQLite file (default metadata.db, relative to the current directory)
#   PEER_PROCESSES     N (default 1; unset or empty means 1; 1..256): N nginx workers and N php-fpm workers
#                      (pm = static), as the other peers run N processes
#   METADATA_REDIS_URL ignored: this peer has no cache (metadata.php's header says why)
# Bad values print one line on stderr and exit 64 (as bench/peers/processes.mjs); php-fpm8.2, nginx or PHP's
# SQLite3 extension missing exits 69 naming the package (`bash scripts/install-test-deps.sh` installs them).
#
# Process tree: bash (this script) -> nginx master -> N workers, and bash -> php-fpm master -> N workers, all
# descendants of the script (neither is daemonized), so a harness that pins the script (children inherit the
# affinity) and sums CPU and RSS over its descendants sees every process. nginx stays in the script's process
# group; php-fpm does not: its master calls setsid() even in the foreground (-F), which nothing turns off, so
# a SIGKILL to the group misses php-fpm. Hence SIGTERM to this script is the way to stop it, and php-fpm's
# master is started with a parent-death signal (setpriv --pdeathsig TERM): if the script is killed outright,
# the master gets SIGTERM and stops its workers itself. nginx's master gets the same, for a kill of the
# script's pid alone.
# SIGTERM or SIGINT: nginx and php-fpm get SIGQUIT (graceful), anything still there after 3 s SIGKILL; exit 0.
# Either one exiting on its own: the other is stopped the same way and the script exits 1, saying which.
# One line on stdout once nginx listens and php-fpm's socket is there:
#   metadata peer: php 8.2.x (php-fpm, OPcache) behind nginx 1.22.1 listening on http://HOST:PORT
#
# Users: when run as root (compare and the tests run as root here), the nginx and php-fpm workers run as root
# too (`user root;`, `user = root` with php-fpm's -R). The database is wherever the caller put it, often in a
# 0700 temp dir that www-data could not even traverse, and running as the invoking user is exactly what
# metadata-rs and the Bun/Node peers do; the socket between them is in this script's own 0700 temp dir, mode
# 0600. Not root: no user directives at all, every process runs as the caller.
set -euo pipefail

name=metadata-php
# Debian puts php-fpm8.2 and nginx in /usr/sbin, which a non-root PATH often lacks.
PATH="$PATH:/usr/sbin:/sbin"

bad() {
  echo "$name: $*" >&2
  exit 64
}
missing() {
  echo "$name: $1 not found: apt-get install $2 (\`bash scripts/install-test-deps.sh\` installs it)" >&2
  exit 69
}

port="${METADATA_PORT:-3001}"
host="${METADATA_HOSTNAME:-127.0.0.1}"
db="${METADATA_DB:-metadata.db}"
procs="${PEER_PROCESSES:-1}"
[[ "$port" =~ ^[0-9]{1,5}$ ]] && ((10#$port >= 1 && 10#$port <= 65535)) \
  || bad "METADATA_PORT: bad port \"$port\" (1 to 65535)"
port=$((10#$port))
[[ "$procs" =~ ^[0-9]{1,3}$ ]] && ((10#$procs >= 1 && 10#$procs <= 256)) \
  || bad "PEER_PROCESSES must be a whole number from 1 to 256, not \"$procs\""
procs=$((10#$procs))
# Written into nginx.conf: no room for quoting games.
[[ "$host" =~ ^[A-Za-z0-9.:-]+$ ]] || bad "METADATA_HOSTNAME: bad address \"$host\""
# IPv6 literals take brackets in nginx's listen and in the URL.
listen="$host"
[[ "$host" == *:* ]] && listen="[$host]"

command -v php-fpm8.2 >/dev/null 2>&1 || missing php-fpm8.2 php8.2-fpm
command -v nginx >/dev/null 2>&1 || missing nginx nginx-light
# The check compare makes too; the extension is loaded explicitly below (php-fpm runs with -n).
[ -f /etc/php/8.2/mods-available/sqlite3.ini ] || missing "PHP's SQLite3 extension" php8.2-sqlite3

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# php-fpm workers do not run in this directory: give them the file by absolute path.
case "$db" in /*) ;; *) db="$PWD/$db" ;; esac
export METADATA_DB="$db"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/metadata-php.XXXXXX")"
# Paths go into both config files unquoted-safe or not at all.
for p in "$here" "$tmp"; do
  [[ "$p" =~ ^[A-Za-z0-9._/+-]+$ ]] || { rm -rf "$tmp"; bad "path \"$p\" has characters nginx.conf cannot take as they are"; }
done

nginx_pid=""
fpm_pid=""
alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }
# The pids whose parent is $1, from /proc (no procps needed).
children_of() {
  local f line state ppid
  for f in /proc/[0-9]*/stat; do
    { read -r line <"$f"; } 2>/dev/null || continue
    read -r state ppid _ <<<"${line##*) }"
    [ "$ppid" = "$1" ] && echo "${f:6:-5}"
  done
  return 0
}
nginx_workers=""
stop_children() {
  for pid in "$nginx_pid" "$fpm_pid"; do alive "$pid" && kill -QUIT "$pid" 2>/dev/null || true; done
  # Graceful first (requests in flight finish); whatever is left after 3 s is killed, workers included.
  for _ in $(seq 300); do
    alive "$nginx_pid" || alive "$fpm_pid" || break
    sleep 0.01
  done
  for pid in "$nginx_pid" "$fpm_pid"; do alive "$pid" && kill -KILL "$pid" 2>/dev/null || true; done
  # Workers whose master was killed outright keep running without it: php-fpm's are in the process group
  # its master made (setsid), nginx's are the ones seen at start (if still nginx workers: pids get reused).
  [ -n "$fpm_pid" ] && kill -KILL -- "-$fpm_pid" 2>/dev/null || true
  local pid cmd
  for pid in $nginx_workers; do
    { read -r -d '' cmd <"/proc/$pid/cmdline"; } 2>/dev/null || true
    [[ "${cmd:-}" == "nginx: worker process"* ]] && kill -KILL "$pid" 2>/dev/null || true
    cmd=""
  done
  wait 2>/dev/null || true
}
cleanup() {
  stop_children
  rm -rf "$tmp"
}
trap cleanup EXIT
stopping=0
trap 'stopping=1' TERM INT

root=0
[ "$(id -u)" -eq 0 ] && root=1
# Every worker holds client and php-fpm connections: allow many (compare sweeps up to 1024 connections and
# more), within the open-file limit the workers inherit, raised to the hard limit here when it can be.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
nofile="$(ulimit -n)"
[ "$nofile" = unlimited ] && nofile=65536
conns=$((nofile < 16384 ? nofile : 16384))

sock="$tmp/php-fpm.sock"
{
  echo "[global]"
  echo "pid = $tmp/php-fpm.pid"
  echo "error_log = /proc/self/fd/2"
  echo "log_level = warning"
  echo "daemonize = no"
  echo "[metadata]"
  if [ "$root" -eq 1 ]; then
    echo "user = root"
    echo "group = root"
  fi
  echo "listen = $sock"
  echo "listen.mode = 0600"
  # nginx opens one connection per request; with hundreds of client connections a short backlog refuses
  # some (502). The kernel caps it at net.core.somaxconn.
  echo "listen.backlog = 65535"
  echo "pm = static"
  echo "pm.max_children = $procs"
  echo "pm.max_requests = 0"
  # METADATA_DB (absolute) reaches metadata.php's getenv() without quoting it into this file.
  echo "clear_env = no"
  echo "catch_workers_output = yes"
  echo "decorate_workers_output = no"
} >"$tmp/php-fpm.conf"

{
  [ "$root" -eq 1 ] && echo "user root;"
  echo "worker_processes $procs;"
  echo "pid $tmp/nginx.pid;"
  echo "error_log stderr warn;"
  echo "events { worker_connections $conns; }"
  echo "http {"
  echo "  access_log off;"
  echo "  server_tokens off;"
  # Keep-alive as the other runtimes keep it: a load's connections are not closed every 1000 requests.
  echo "  keepalive_requests 1000000;"
  echo "  keepalive_timeout 75s;"
  for t in client_body proxy fastcgi uwsgi scgi; do echo "  ${t}_temp_path $tmp/$t;"; done
  # The largest answers (a long stored title) stay in memory.
  echo "  fastcgi_buffer_size 16k;"
  echo "  fastcgi_buffers 16 16k;"
  echo "  fastcgi_hide_header X-Powered-By;"
  echo "  server {"
  echo "    listen $listen:$port backlog=65535;"
  # nginx refuses some requests itself, with an HTML page, before any location; two kinds go to metadata.php
  # instead, which answers them as metadata-rs does:
  #  - 405 (TRACE, CONNECT): through a named location, which keeps the method (nginx closes the connection).
  #  - 400 for a request line whose path nginx cannot decode (a bad %-escape such as %zz, a NUL, a dot segment
  #    above the root) or whose method is not upper case: nginx has no $request_uri then, so metadata.php reads
  #    method and target from the request line ($request, REQUEST_LINE). Other 400s (no Host, a bad
  #    Content-Length, a request line that is not one) stay nginx's: metadata-rs refuses those too.
  #    The redirect target /../refused is one no client can reach: nginx turns a path climbing above the root
  #    into a 400 (and decodes %2F first), and an internal redirect is matched as written.
  echo "    error_page 405 = @metadata;"
  echo "    error_page 400 = /../refused;"
  echo "    location = /../refused {"
  echo "      if (\$request_uri != \"\") { return 400; }"
  echo "      fastcgi_pass unix:$sock;"
  echo "    }"
  # Every request goes to metadata.php: the parameters (server level, so every location inherits them) are
  # only what it reads and what php-fpm needs.
  echo "    fastcgi_param SCRIPT_FILENAME $here/metadata.php;"
  echo "    fastcgi_param REQUEST_METHOD \$request_method;"
  # The raw target: metadata.php decodes the id and reads the query itself, as the other runtimes do.
  echo "    fastcgi_param REQUEST_URI \$request_uri;"
  echo "    fastcgi_param REQUEST_LINE \$request;"
  echo "    fastcgi_param QUERY_STRING \$query_string;"
  echo "    fastcgi_param CONTENT_TYPE \$content_type;"
  echo "    fastcgi_param CONTENT_LENGTH \$content_length;"
  echo "    fastcgi_param SERVER_PROTOCOL \$server_protocol;"
  echo "    fastcgi_param GATEWAY_INTERFACE CGI/1.1;"
  echo "    location / { fastcgi_pass unix:$sock; }"
  echo "    location @metadata { fastcgi_pass unix:$sock; }"
  echo "  }"
  echo "}"
} >"$tmp/nginx.conf"

# -n: no php.ini or conf.d from the host; everything that matters is here. OPcache on without timestamp
# checks (the script never changes during a run); Debian's default of no JIT. variables_order=S and no POST
# parsing: the script reads the method and target from $_SERVER and nothing else. No default content type:
# every answer names its own, and the one without a body (a bad request line) has none, as metadata-rs's.
fpm_args=(
  -F -n -y "$tmp/php-fpm.conf"
  -d zend_extension=opcache -d extension=sqlite3
  -d opcache.enable=1 -d opcache.validate_timestamps=0 -d opcache.memory_consumption=32
  -d opcache.interned_strings_buffer=8 -d opcache.max_accelerated_files=1000 -d opcache.jit_buffer_size=0
  -d expose_php=0 -d default_mimetype= -d display_errors=0 -d log_errors=1 -d error_log=/proc/self/fd/2
  -d variables_order=S -d request_order= -d enable_post_data_reading=0 -d zend.assertions=-1
)
[ "$root" -eq 1 ] && fpm_args+=(-R)
# util-linux's setpriv (on every Debian) sets the parent-death signal and execs the server; without it they
# run without one.
pdeath=()
command -v setpriv >/dev/null 2>&1 && pdeath=(setpriv --pdeathsig TERM --)
"${pdeath[@]}" php-fpm8.2 "${fpm_args[@]}" </dev/null &
fpm_pid=$!
"${pdeath[@]}" nginx -p "$tmp" -c "$tmp/nginx.conf" -g 'daemon off;' </dev/null &
nginx_pid=$!

php_version="$(php-fpm8.2 -n -v 2>/dev/null | sed -n '1s/^PHP \([^ ]*\).*/\1/p')"
nginx_version="$(nginx -v 2>&1 | sed -n 's|.*nginx/\([^ ]*\).*|\1|p')"

# Ready when both masters have their N workers (nginx binds the port before forking them, php-fpm creates
# its socket before forking them; a connection made earlier waits in the backlog).
ready=0
for _ in $(seq 1000); do
  [ "$stopping" -eq 1 ] && exit 0
  alive "$fpm_pid" || { echo "$name: php-fpm exited while starting" >&2; exit 1; }
  alive "$nginx_pid" || { echo "$name: nginx exited while starting" >&2; exit 1; }
  if [ -S "$sock" ] && [ -s "$tmp/nginx.pid" ]; then
    nginx_workers="$(children_of "$nginx_pid")"
    if [ "$(wc -w <<<"$nginx_workers")" -ge "$procs" ] && [ "$(children_of "$fpm_pid" | wc -l)" -ge "$procs" ]; then
      ready=1
      break
    fi
  fi
  sleep 0.01
done
if [ "$ready" -ne 1 ]; then
  echo "$name: php-fpm or nginx not ready after 10 s" >&2
  exit 1
fi
echo "metadata peer: php ${php_version:-8.2} (php-fpm, OPcache) behind nginx ${nginx_version:-?} listening on http://$listen:$port"

# wait -n returns when either child exits, or early when a trapped signal arrives.
code=0
while [ "$stopping" -eq 0 ]; do
  wait -n "$fpm_pid" "$nginx_pid" 2>/dev/null && code=0 || code=$?
  [ "$stopping" -eq 1 ] && break
  if ! alive "$fpm_pid" || ! alive "$nginx_pid"; then
    which=nginx
    alive "$nginx_pid" && which=php-fpm
    echo "$name: $which exited unexpectedly (status $code); stopping" >&2
    exit 1
  fi
done
exit 0
