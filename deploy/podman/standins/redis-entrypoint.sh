#!/bin/sh
# The official redis image's entrypoint, in short: a `redis-server` command runs as the redis user, owns
# /data (a fresh volume is root's), and has protected mode off unless the command sets it.
set -e
if [ "${1#-}" != "$1" ]; then set -- redis-server "$@"; fi
if [ "$1" = redis-server ] && [ "$(id -u)" = 0 ]; then
  find . \! -user redis -exec chown redis:redis '{}' +
  shift
  case " $* " in
    *" --protected-mode "*) ;;
    *) set -- --protected-mode no "$@" ;;
  esac
  exec setpriv --reuid=redis --regid=redis --init-groups redis-server "$@"
fi
exec "$@"
