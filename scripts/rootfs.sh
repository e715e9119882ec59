# Sourced by the scripts that make an image from the host's own files, for hosts that reach no image
# registry (node-base-image.sh, python-bot-image.sh, client-bot-image.sh).

# rootfs_libs ROOT FILE...: the libraries FILE... link, where they link them, glibc's NSS modules (so that
# host names resolve) and the loader.
rootfs_libs() {
  local root=$1 so
  shift
  for so in $(for file in "$@"; do ldd "$file"; done | awk '/=> \//{print $3}' | sort -u) \
    /lib/x86_64-linux-gnu/libnss_files.so.2 /lib/x86_64-linux-gnu/libnss_dns.so.2 /lib/x86_64-linux-gnu/libresolv.so.2; do
    mkdir -p "$root$(dirname "$so")"
    cp -L "$so" "$root$so"
  done
  mkdir -p "$root/lib64"
  cp -L /lib64/ld-linux-x86-64.so.2 "$root/lib64/"
}

# rootfs_busybox ROOT: a busybox userland in /bin, and names resolved from files, then DNS.
rootfs_busybox() {
  local root=$1 applet
  mkdir -p "$root/bin" "$root/etc"
  cp /bin/busybox "$root/bin/busybox"
  for applet in $("$root/bin/busybox" --list); do
    [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
  done
  printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
}

# rootfs_users ROOT NAME ID HOME: root, and one user NAME (uid and gid ID) whose home is HOME.
rootfs_users() {
  printf 'root:x:0:0:root:/root:/bin/sh\n%s:x:%s:%s::%s:/bin/sh\n' "$2" "$3" "$3" "$4" >"$1/etc/passwd"
  printf 'root:x:0:\n%s:x:%s:\n' "$2" "$3" >"$1/etc/group"
}
