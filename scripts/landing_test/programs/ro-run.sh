#!/bin/sh
# Runs as root inside a build step, only to take / away: a private mount
# namespace, / bind-mounted onto itself read-only, then the image's entrypoint
# as the image's user with no capabilities. /.t (busybox) and the secret are
# separate mounts.
B=/.t/bin/busybox
uid=$1 gid=$2
shift 2
exec $B unshare -m $B sh -c '
B=/.t/bin/busybox
uid=$1 gid=$2
shift 2
$B mount --bind / / && $B mount -o remount,bind,ro / || { echo "ro-run: cannot remount / read-only"; exit 90; }
$B touch /tmp/.probe 2>/dev/null && { echo "ro-run: / still writable as root"; exit 91; }
exec $B nsenter -S "$uid" -G "$gid" -F $B sh -c "
  echo ro-run: uid=\$($B id -u) gid=\$($B id -g) \$($B grep CapEff /proc/self/status)
  $B touch /tmp/.probe 2>/dev/null && { echo ro-run: /tmp writable; exit 92; }
  exec \"\$@\"
" ro-run "$@"
' ro-run "$uid" "$gid" "$@"
