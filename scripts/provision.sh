#!/usr/bin/env bash
# Installs or upgrades edgebox on a running device over ssh, then reports
# whether it serves.
#
#   scripts/provision.sh HOST [--deb FILE] [--ssh-option OPTION]... [--port N]
#
#   HOST                 what ssh takes: user@jetson.local, or a Host from ~/.ssh/config
#   --deb FILE           the package (default: the newest dist/edgebox_*_<arch>.deb,
#                        <arch> being the device's `dpkg --print-architecture`)
#   --ssh-option OPTION  passed as `-o OPTION` to both ssh and scp (Port=2222,
#                        IdentityFile=~/.ssh/jetson, StrictHostKeyChecking=accept-new)
#   --port N             edgebox's HTTP port on the device (default 8000)
#
# Steps: the device's architecture and installed version; the package copied
# with scp into a fresh folder under /tmp; `sudo dpkg -i --force-confold` (sudo
# may ask for the password: ssh gets a terminal when this one has one); the
# folder removed; then `systemctl is-active edgebox` and the HTTP status of
# /v2/health/ready, polled for up to 60 s while models load.
# What the user changed survives: /etc/edgebox/edgebox.yaml is a conffile
# (--force-confold keeps an edited one without asking), and postinst seeds
# /var/lib/edgebox/models with the demo models only on a first install into an
# empty folder. The package's dependencies (python3, python3-venv, adduser)
# must be on the device; dpkg does not fetch them (`sudo apt-get -f install`
# does, with network).
# Exit 0 when the service is active and ready answers 200, 1 otherwise (with
# the journal's last lines).
set -euo pipefail

project=$(cd "$(dirname "$0")/.." && pwd)
me=provision.sh
die() { echo "$me: $*" >&2; exit 1; }

host=""
deb=""
port=8000
ssh_options=()
while [ $# -gt 0 ]; do
    case "$1" in
        --deb) [ $# -ge 2 ] || die "--deb needs a FILE"; deb=$2; shift 2 ;;
        --ssh-option) [ $# -ge 2 ] || die "--ssh-option needs an OPTION"; ssh_options+=(-o "$2"); shift 2 ;;
        --port) [ $# -ge 2 ] || die "--port needs a number"; port=$2; shift 2 ;;
        -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
        -*) echo "$me: unknown option '$1' (see --help)" >&2; exit 2 ;;
        *) [ -z "$host" ] || { echo "$me: one HOST only, got '$host' and '$1'" >&2; exit 2; }
           host=$1; shift ;;
    esac
done
[ -n "$host" ] || { sed -n '2,27p' "$0" >&2; exit 2; }
case "$port" in ''|*[!0-9]*) die "--port: expected a number, got '$port'" ;; esac
if [ -n "$deb" ]; then
    [ -f "$deb" ] || die "--deb '$deb' is not a file"
    dpkg-deb -f "$deb" Package >/dev/null 2>&1 || die "--deb '$deb' is not a Debian package"
fi

# ssh hands its arguments, joined, to the device's shell: callers quote for it.
# shellcheck disable=SC2029
remote() { ssh "${ssh_options[@]}" "$host" "$@"; }
# sudo may prompt: give it a terminal when there is one.
remote_tty() {
    if [ -t 0 ]; then ssh -t "${ssh_options[@]}" "$host" "$@"; else remote "$@"; fi
}

arch=$(remote dpkg --print-architecture) || die "cannot run commands on '$host' over ssh"
before=$(remote "dpkg-query -W -f='\${Version}' edgebox 2>/dev/null || true")

if [ -z "$deb" ]; then
    deb=$(find "$project/dist" -maxdepth 1 -name "edgebox_*_$arch.deb" 2>/dev/null \
        | while read -r file; do
            echo "$(dpkg-deb -f "$file" Version) $file"
          done | sort -V | tail -n1 | cut -d' ' -f2-)
    [ -n "$deb" ] || die "no --deb given and no dist/edgebox_*_$arch.deb for '$host' ($arch):" \
        "build one with scripts/build_deb.sh --arch $arch"
fi
deb_arch=$(dpkg-deb -f "$deb" Architecture)
version=$(dpkg-deb -f "$deb" Version)
[ "$deb_arch" = "$arch" ] || die "--deb '$deb' is for $deb_arch, '$host' is $arch"

echo "$me: $host ($arch): edgebox ${before:-not installed} -> $version"
dir=$(remote mktemp -d /tmp/edgebox-provision.XXXXXX)
case "$dir" in /tmp/edgebox-provision.*) ;; *) die "mktemp on '$host' answered '$dir'" ;; esac
scp -q "${ssh_options[@]}" "$deb" "$host:$dir/edgebox.deb" || die "scp to '$host' failed"
installed=0
remote_tty sudo DEBIAN_FRONTEND=noninteractive dpkg -i --force-confold "$dir/edgebox.deb" && installed=1
remote rm -rf "$dir" || true
[ "$installed" = 1 ] || die "dpkg -i failed on '$host' (its output is above); missing" \
    "dependencies: ssh $host sudo apt-get -f install; a failed postinst: fix, then sudo dpkg --configure -a"

state=$(remote systemctl is-active edgebox || true)
# A bounded wait for the models to load; ready answers 503 until they have.
ready=$(remote "for i in \$(seq 60); do
    code=\$(curl -s -o /dev/null -w '%{http_code}' http://localhost:$port/v2/health/ready)
    [ \"\$code\" = 200 ] && break; sleep 1; done; echo \"\$code\"" || true)
echo "$me: $host: systemctl is-active edgebox: ${state:-unknown}"
echo "$me: $host: GET localhost:$port/v2/health/ready: ${ready:-no answer}"
if [ "$state" = active ] && [ "$ready" = 200 ]; then
    echo "$me: $host serves edgebox $version"
    exit 0
fi
remote journalctl -u edgebox -n 20 --no-pager >&2 || true
die "$host: edgebox $version is installed but not serving (journal above)"
