#!/usr/bin/env bash
# Installs the edgebox .deb into a root filesystem before it is flashed: an
# L4T Linux_for_Tegra/rootfs (after apply_binaries.sh) or any Debian/Ubuntu
# root, so that NVIDIA's flash.sh / l4t_initrd_flash.sh write an image that
# boots into edgebox.service.
#
#   sudo scripts/flash/install-into-rootfs.sh ROOTFS [--deb FILE]
#        [--repository DIR] [--config FILE] [--reinstall]
#
#   --deb FILE         the package (default: the newest dist/edgebox_*_<arch>.deb,
#                      <arch> being the root's: var/lib/dpkg/arch, else the ELF
#                      header of its /bin/sh)
#   --repository DIR   replaces /var/lib/edgebox/models with a copy of DIR,
#                      owned by the root's edgebox user
#   --config FILE      checked inside the root with `edgebox check --config`,
#                      then installed as /etc/edgebox/edgebox.yaml (root:edgebox 0640)
#   --reinstall        run dpkg -i even when this version is already installed
#
# dpkg runs in a chroot, inside new mount and network namespaces
# (`unshare --mount --net`): the chroot has no network at all, and /proc,
# /sys and /dev are mounted only in that namespace, so they disappear with it,
# even if this script is killed. A root of another architecture runs under
# qemu-user-static, which needs binfmt_misc registered on the host (the
# script checks and says how). The package's dependencies (python3 of the
# package's version, python3-venv, adduser) must already be in the root:
# nothing is downloaded. The service is enabled, not started.
# Running it twice gives the same root: an installed version is left alone,
# the repository and config are replaced by the same copies.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
project=$(cd "$here/../.." && pwd)
me=install-into-rootfs.sh

die() { echo "$me: $*" >&2; exit 1; }
usage() { sed -n '2,28p' "$0"; }

rootfs=""
deb=""
repository=""
config=""
reinstall=0
while [ $# -gt 0 ]; do
    case "$1" in
        --deb) [ $# -ge 2 ] || die "--deb needs a FILE"; deb=$2; shift 2 ;;
        --repository) [ $# -ge 2 ] || die "--repository needs a DIR"; repository=$2; shift 2 ;;
        --config) [ $# -ge 2 ] || die "--config needs a FILE"; config=$2; shift 2 ;;
        --reinstall) reinstall=1; shift ;;
        -h|--help) usage; exit 0 ;;
        -*) echo "$me: unknown option '$1' (see --help)" >&2; exit 2 ;;
        *) [ -z "$rootfs" ] || { echo "$me: one ROOTFS only, got '$rootfs' and '$1'" >&2; exit 2; }
           rootfs=$1; shift ;;
    esac
done
[ -n "$rootfs" ] || { usage >&2; exit 2; }

# --- what is being installed where --------------------------------------------

[ -d "$rootfs" ] || die "ROOTFS '$rootfs' is not a directory"
rootfs=$(cd "$rootfs" && pwd -P)
[ "$rootfs" != / ] || die "ROOTFS is '/': this script installs into another root, not into this machine (use apt install there)"
for entry in var/lib/dpkg/status bin/sh etc/passwd; do
    [ -e "$rootfs/$entry" ] || [ -L "$rootfs/$entry" ] \
        || die "'$rootfs' is not a Debian/Ubuntu root filesystem: no /$entry"
done
[ -e "$rootfs/etc/os-release" ] || [ -L "$rootfs/etc/os-release" ] || [ -e "$rootfs/usr/lib/os-release" ] \
    || die "'$rootfs' is not a Debian/Ubuntu root filesystem: no /etc/os-release"
if [ -n "$repository" ]; then
    [ -d "$repository" ] || die "--repository '$repository' is not a directory"
    repository=$(cd "$repository" && pwd -P)
fi
if [ -n "$config" ]; then
    [ -f "$config" ] || die "--config '$config' is not a file"
fi

# Follows a symlink inside the root (an absolute target is relative to ROOTFS).
resolve_in_root() { # PATH-IN-ROOT
    local path=$1 target hops=0
    while [ -L "$rootfs$path" ] && [ $hops -lt 16 ]; do
        target=$(readlink "$rootfs$path")
        case "$target" in
            /*) path=$target ;;
            *) path=$(dirname "$path")/$target ;;
        esac
        hops=$((hops + 1))
    done
    echo "$rootfs$path"
}

# dpkg's native architecture is the first line of var/lib/dpkg/arch, which
# exists once a foreign architecture was added; else the ELF e_machine of /bin/sh.
root_arch() {
    if [ -s "$rootfs/var/lib/dpkg/arch" ]; then
        head -n1 "$rootfs/var/lib/dpkg/arch"
        return
    fi
    local sh magic machine
    sh=$(resolve_in_root /bin/sh)
    [ -f "$sh" ] || die "'$rootfs': /bin/sh does not resolve to a file inside the root"
    magic=$(od -An -tx1 -N4 "$sh" | tr -d ' \n')
    [ "$magic" = 7f454c46 ] || die "'$rootfs': /bin/sh is not an ELF executable"
    machine=$(od -An -tu2 -j18 -N2 --endian=little "$sh" | tr -d ' ')
    case "$machine" in
        62) echo amd64 ;;
        183) echo arm64 ;;
        40) echo armhf ;;
        *) die "'$rootfs': /bin/sh is for ELF machine $machine, which this script does not know" ;;
    esac
}
arch=$(root_arch)
host_arch=$(dpkg --print-architecture 2>/dev/null || true)
if [ -z "$host_arch" ]; then
    case "$(uname -m)" in
        x86_64) host_arch=amd64 ;;
        aarch64) host_arch=arm64 ;;
        *) host_arch=$(uname -m) ;;
    esac
fi

if [ -z "$deb" ]; then
    deb=$(find "$project/dist" -maxdepth 1 -name "edgebox_*_$arch.deb" 2>/dev/null \
        | while read -r file; do
            echo "$(dpkg-deb -f "$file" Version) $file"
          done | sort -V | tail -n1 | cut -d' ' -f2-)
    [ -n "$deb" ] || die "no --deb given and no dist/edgebox_*_$arch.deb: build one with" \
        "scripts/build_deb.sh --arch $arch"
fi
[ -f "$deb" ] || die "--deb '$deb' is not a file"
deb_arch=$(dpkg-deb -f "$deb" Architecture) || die "--deb '$deb' is not a Debian package"
deb_package=$(dpkg-deb -f "$deb" Package)
deb_version=$(dpkg-deb -f "$deb" Version)
[ "$deb_package" = edgebox ] || die "--deb '$deb' is package '$deb_package', expected 'edgebox'"
[ "$deb_arch" = "$arch" ] || die "--deb '$deb' is for $deb_arch, the root '$rootfs' is $arch:" \
    "build it with scripts/build_deb.sh --arch $arch"

# --- the root's own packages: nothing is downloaded ----------------------------

admindir=$rootfs/var/lib/dpkg
installed_version() { # PACKAGE -> version, empty unless installed and configured
    dpkg-query --admindir="$admindir" -W -f='${db:Status-Abbrev} ${Version}\n' "$1" 2>/dev/null \
        | awk '$1 == "ii" { print $2 }' || true
}
python_version=$(installed_version python3)
[ -n "$python_version" ] || die "the root '$rootfs' has no python3 package; install python3 and" \
    "python3-venv into it first (docs/appliance.md, \"Preparing the root\")"
[ -n "$(installed_version python3-venv)" ] || die "the root '$rootfs' has no python3-venv, which" \
    "edgebox's postinst needs to build its virtualenv; add it before flashing (with network):" \
    "docs/appliance.md, \"Preparing the root\""
[ -n "$(installed_version adduser)" ] || die "the root '$rootfs' has no adduser package; install it first"
# The package's python3 range (python3 (>= 3.10~), python3 (<< 3.11)).
dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed -n 's/^ *python3 *(\(..\) *\([^)]*\)).*/\1 \2/p' \
    | while read -r op bound; do
        dpkg --compare-versions "$python_version" "$op" "$bound" || die "the root has python3" \
            "$python_version, this package needs python3 ($op $bound): build it with" \
            "scripts/build_deb.sh --python <the root's Python>"
    done

# --- a foreign architecture runs under qemu-user-static ------------------------

qemu_copy=""
if [ "$arch" != "$host_arch" ]; then
    case "$arch" in
        arm64) qemu=aarch64 ;;
        armhf) qemu=arm ;;
        amd64) qemu=x86_64 ;;
        *) qemu=$arch ;;
    esac
    entry=/proc/sys/fs/binfmt_misc/qemu-$qemu
    fix="install qemu-user-static and binfmt-support on this host (sudo apt-get install"
    fix="$fix qemu-user-static binfmt-support), then: sudo update-binfmts --enable qemu-$qemu;"
    fix="$fix in a container, binfmt_misc belongs to the host kernel: do this on the host"
    [ -f /proc/sys/fs/binfmt_misc/status ] \
        || die "the root is $arch and this machine $host_arch, but binfmt_misc is not mounted" \
            "(mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc); $fix"
    [ -f "$entry" ] || die "the root is $arch and this machine $host_arch, but no binfmt_misc" \
        "handler qemu-$qemu is registered; $fix"
    grep -qx enabled "$entry" || die "binfmt_misc handler qemu-$qemu is disabled; $fix"
    interpreter=$(sed -n 's/^interpreter //p' "$entry")
    # Without the F flag the kernel opens the interpreter inside the chroot.
    if ! grep -q '^flags:.*F' "$entry" && [ ! -e "$rootfs$interpreter" ]; then
        [ -x "$interpreter" ] || die "binfmt_misc handler qemu-$qemu names $interpreter, which is missing; $fix"
        qemu_copy=$rootfs$interpreter
    fi
fi

[ "$(id -u)" = 0 ] || die "needs root (chroot, mounts, file ownership): run it with sudo"

# --- staging inside the root, removed on any exit -------------------------------

stage=""
policy_rc=""
cleanup() {
    [ -z "$stage" ] || rm -rf "$stage"
    [ -z "$policy_rc" ] || rm -f "$policy_rc"
    [ -z "$qemu_copy" ] || rm -f "$qemu_copy"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -n "$qemu_copy" ]; then
    mkdir -p "$(dirname "$qemu_copy")"
    cp "$interpreter" "$qemu_copy"
fi
mkdir -p "$rootfs/tmp"
stage=$(mktemp -d "$rootfs/tmp/edgebox-install.XXXXXX")
chmod 0755 "$stage"
stage_in_root=${stage#"$rootfs"}
# Nothing may start a service inside the root (invoke-rc.d, deb-systemd-invoke).
if [ ! -e "$rootfs/usr/sbin/policy-rc.d" ]; then
    policy_rc=$rootfs/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' > "$policy_rc"
    chmod 0755 "$policy_rc"
fi

# Runs a command in the root with no network; the mounts live in the new
# mount namespace only (private propagation), so the host never sees them.
in_root() { # COMMAND...
    # shellcheck disable=SC2016 # the inner shell expands its own arguments
    unshare --mount --net --propagation private -- /bin/sh -ec '
        root=$1; shift
        mount -t proc proc "$root/proc"
        mount --bind /sys "$root/sys"
        mount --bind /dev "$root/dev"
        exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
            LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive HOME=/root "$@"
    ' in_root "$rootfs" "$@"
}
for dir in proc sys dev; do mkdir -p "$rootfs/$dir"; done

# --- the package ----------------------------------------------------------------

current=$(installed_version edgebox)
if [ "$current" = "$deb_version" ] && [ "$reinstall" = 0 ]; then
    echo "$me: edgebox $deb_version is already installed in $rootfs (--reinstall to install it again)"
else
    cp "$deb" "$stage/edgebox.deb"
    echo "$me: installing edgebox $deb_version ($arch) into $rootfs${current:+ over $current}, no network"
    # --force-confold: a conffile edited in the root is kept, never asked about.
    in_root dpkg -i --force-confold "$stage_in_root/edgebox.deb" \
        || die "dpkg -i failed inside the root (its output is above); the root's dpkg" \
            "database says: $(dpkg-query --admindir="$admindir" -W -f='${db:Status-Abbrev}' edgebox 2>/dev/null)"
fi

# --- enabled at boot --------------------------------------------------------------

unit=$rootfs/lib/systemd/system/edgebox.service
[ -f "$unit" ] || unit=$rootfs/usr/lib/systemd/system/edgebox.service
[ -f "$unit" ] || die "the package installed no edgebox.service"
wanted_by=$(sed -n 's/^WantedBy=//p' "$unit")
[ -n "$wanted_by" ] || die "edgebox.service has no WantedBy= to enable it with"
for target in $wanted_by; do
    link=$rootfs/etc/systemd/system/$target.wants/edgebox.service
    if [ ! -L "$link" ]; then
        mkdir -p "$(dirname "$link")"
        ln -sfn "${unit#"$rootfs"}" "$link"
    fi
    echo "$me: enabled: /etc/systemd/system/$target.wants/edgebox.service -> $(readlink "$link")"
done

# --- models and settings ----------------------------------------------------------

owner=$(awk -F: '$1 == "edgebox" { print $3 ":" $4 }' "$rootfs/etc/passwd")
[ -n "$owner" ] || die "the root has no edgebox user after the install"

if [ -n "$repository" ]; then
    models=$rootfs/var/lib/edgebox/models
    rm -rf "$models.new" "$models.old"
    mkdir "$models.new"
    cp -a "$repository/." "$models.new/"
    chown -R "$owner" "$models.new"
    chmod 0755 "$models.new"
    [ ! -e "$models" ] || mv -T "$models" "$models.old"
    mv -T "$models.new" "$models"
    rm -rf "$models.old"
    echo "$me: /var/lib/edgebox/models is now a copy of $repository (owner edgebox, $owner)"
fi

if [ -n "$config" ]; then
    cp "$config" "$stage/edgebox.yaml"
    chmod 0644 "$stage/edgebox.yaml"
    in_root /usr/bin/edgebox check --config "$stage_in_root/edgebox.yaml" \
        || die "--config '$config' does not pass \`edgebox check --config\` in the root" \
            "(problems above, named by their path in the root); /etc/edgebox/edgebox.yaml unchanged"
    # As postinst leaves it: it may hold the dashboard's password hash.
    install -m 0640 -o 0 -g "${owner#*:}" "$config" "$rootfs/etc/edgebox/edgebox.yaml"
    echo "$me: /etc/edgebox/edgebox.yaml is now $config (root:edgebox 0640)"
fi

echo "$me: done: edgebox $(installed_version edgebox) in $rootfs, enabled; flash the root now"
