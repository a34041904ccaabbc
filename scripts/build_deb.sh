#!/usr/bin/env bash
# Builds edgebox_<version>_<arch>.deb, an offline package: it carries every
# wheel edgebox needs (a wheelhouse for one architecture and one Python), so
# its postinst builds /opt/edgebox/venv with no network at all.
#
#   scripts/build_deb.sh [--arch arm64|amd64] [--python 3.10|3.11]
#                        [--onnxruntime-wheel FILE] [--ref REF] [--out DIR]
#   scripts/build_deb.sh --update-lock
#
# Defaults: --arch arm64 --python 3.10 (JetPack 6: Ubuntu 22.04, glibc 2.35).
# Copies the repository into a temporary folder (by default the files git
# would commit, as they are in the working tree; with --ref, exactly the
# committed tree REF), generates the demo model repository's ONNX file there,
# builds edgebox's wheel, downloads its dependencies as manylinux wheels for
# the target (`pip download --only-binary=:all: --platform ...`, the versions
# pinned by debian/wheelhouse.lock, each file checked against
# debian/wheelhouse.sha256), runs `dpkg-buildpackage -a<arch> -us -uc -b`, and
# puts the .deb in DIR (default: dist/). Nothing in the working tree changes.
# Only this step needs the network (PyPI, or $EDGEBOX_INDEX_URL).
#
# --onnxruntime-wheel FILE puts FILE (NVIDIA's onnxruntime-gpu for JetPack,
# say) in the wheelhouse instead of PyPI's CPU onnxruntime; its tags must
# match --arch and --python. Its own dependencies still come from the lock.
#
# --update-lock re-resolves debian/constraints.txt plus edgebox's dependencies
# for arm64/3.10 (the narrowest target), writes the exact versions to
# debian/wheelhouse.lock, checks that they resolve for all four targets
# (arm64, amd64 x 3.10, 3.11) and writes every wheel's sha256 to
# debian/wheelhouse.sha256. Commit both.
#
# Needs, on Debian 12 or Ubuntu 22.04 (any build architecture):
#   sudo apt-get install dpkg-dev debhelper python3 python3-pip python3-setuptools python3-wheel
# and a Python with `onnx` and `numpy` for the demo model, taken from $PYTHON,
# else .venv/bin/python (`make demo-models` sets that up), else python3.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
ref=""
out="$root/dist"
arch=arm64
pyver=3.10
ort_wheel=""
update_lock=0
index_url=${EDGEBOX_INDEX_URL:-https://pypi.org/simple}
while [ $# -gt 0 ]; do
    case "$1" in
        --ref) ref=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --arch) arch=$2; shift 2 ;;
        --python) pyver=$2; shift 2 ;;
        --onnxruntime-wheel) ort_wheel=$(realpath "$2"); shift 2 ;;
        --update-lock) update_lock=1; shift ;;
        -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
        *) echo "build_deb.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

case "$arch" in
    arm64|amd64) ;;
    *) echo "build_deb.sh: --arch: expected arm64 or amd64, got '$arch'" >&2; exit 2 ;;
esac
case "$pyver" in
    3.10|3.11) ;;
    *) echo "build_deb.sh: --python: expected 3.10 or 3.11, got '$pyver'" >&2; exit 2 ;;
esac
if [ -n "$ort_wheel" ] && [ ! -f "$ort_wheel" ]; then
    echo "build_deb.sh: --onnxruntime-wheel: '$ort_wheel' is not a file" >&2
    exit 2
fi

for tool in dpkg-buildpackage dh git sha256sum; do
    command -v "$tool" >/dev/null || {
        echo "build_deb.sh: '$tool' not found; install: sudo apt-get install dpkg-dev" \
             "debhelper git python3 python3-pip python3-setuptools python3-wheel" >&2
        exit 1
    }
done

python=${PYTHON:-}
if [ -z "$python" ]; then
    if [ -x "$root/.venv/bin/python" ]; then python="$root/.venv/bin/python"; else python=python3; fi
fi
if ! "$python" -c "import onnx, numpy" 2>/dev/null; then
    echo "build_deb.sh: $python cannot import onnx and numpy, needed to generate the demo" \
         "model; run \`make demo-models\` (it creates .venv) or set PYTHON" >&2
    exit 1
fi

version=$(dpkg-parsechangelog -l "$root/debian/changelog" -S Version)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
src="$work/edgebox-${version%-*}"
mkdir -p "$src"

if [ -n "$ref" ]; then
    git -C "$root" archive --format=tar "$ref" | tar -x -C "$src"
else
    (cd "$root" && git ls-files -z --cached --others --exclude-standard \
        | tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -x -C "$src"
fi

# edgebox's own wheel, only to name its dependencies to `pip download`
# (debian/rules builds the one that ships, the same way).
(cd "$src" && /usr/bin/python3 scripts/build_web.py >/dev/null)
PIP_NO_INPUT=1 /usr/bin/python3 -m pip wheel -q --isolated --no-deps --no-build-isolation \
    --no-index --no-cache-dir --disable-pip-version-check --wheel-dir "$work/edgebox-wheel" "$src"
edgebox_wheel=$(ls "$work"/edgebox-wheel/edgebox-*.whl)
rm -rf "$src/build" "$src"/*.egg-info

# The wheelhouse for one target: manylinux wheels up to glibc 2.35 (Ubuntu
# 22.04, JetPack 6; Debian 12 has 2.36), or pure-Python ones. pip does not
# expand manylinux_2_X to the older tags itself, hence the list.
# --isolated: this machine's pip.conf (extra indexes, find-links) stays out.
download() { # ARCH PYVER DEST CONSTRAINTS REQUIREMENT...
    local machine=$1 py=$2 dest=$3 constraints=$4 glibc
    shift 4
    [ "$machine" = arm64 ] && machine=aarch64
    [ "$machine" = amd64 ] && machine=x86_64
    local platforms=()
    for glibc in $(seq 35 -1 17); do platforms+=(--platform "manylinux_2_${glibc}_$machine"); done
    platforms+=(--platform "manylinux2014_$machine")
    # NVIDIA's Jetson wheels are tagged linux_aarch64 (PyPI takes no such
    # tags, so this admits only the --onnxruntime-wheel file).
    [ -n "$ort_wheel" ] && platforms+=(--platform "linux_$machine")
    PIP_NO_INPUT=1 "$python" -m pip download --isolated -q --disable-pip-version-check \
        --index-url "$index_url" --only-binary=:all: "${platforms[@]}" \
        --python-version "$py" --implementation cp --abi "cp${py/./}" \
        --dest "$dest" --constraint "$constraints" "$@"
}

if [ "$update_lock" = 1 ]; then
    download arm64 3.10 "$work/resolve" "$root/debian/constraints.txt" "$edgebox_wheel" onnxruntime
    {
        sed -n '1,/^$/p' "$root/debian/wheelhouse.lock"
        for wheel in "$work"/resolve/*.whl; do
            name=$(basename "$wheel" | cut -d- -f1 | tr _ - | tr '[:upper:]' '[:lower:]')
            [ "$name" = edgebox ] && continue
            echo "$name==$(basename "$wheel" | cut -d- -f2)"
        done
    } > "$work/lock"
    for target in arm64:3.10 arm64:3.11 amd64:3.10 amd64:3.11; do
        download "${target%:*}" "${target#*:}" "$work/all" "$work/lock" "$edgebox_wheel" onnxruntime
    done
    rm -f "$work"/all/edgebox-*.whl
    cp "$work/lock" "$root/debian/wheelhouse.lock"
    (cd "$work/all" && sha256sum -- *.whl) > "$root/debian/wheelhouse.sha256"
    echo "wrote debian/wheelhouse.lock ($(grep -c '==' "$root/debian/wheelhouse.lock") pins)" \
         "and debian/wheelhouse.sha256 ($(wc -l < "$root/debian/wheelhouse.sha256") wheels)"
    exit 0
fi

wheelhouse="$src/debian/wheelhouse"
if [ -n "$ort_wheel" ]; then ort_requirement=$ort_wheel; else ort_requirement=onnxruntime; fi
download "$arch" "$pyver" "$wheelhouse" "$root/debian/wheelhouse.lock" \
    "$edgebox_wheel" "$ort_requirement"
rm -f "$wheelhouse"/edgebox-*.whl
# Every downloaded file must be one the lock's author saw (same name, same
# bytes): a re-uploaded or newly preferred wheel stops the build.
for wheel in "$wheelhouse"/*.whl; do
    name=$(basename "$wheel")
    [ -n "$ort_wheel" ] && [ "$name" = "$(basename "$ort_wheel")" ] && continue
    expected=$(awk -v f="$name" '$2 == f { print $1 }' "$root/debian/wheelhouse.sha256")
    if [ -z "$expected" ]; then
        echo "build_deb.sh: $name is not in debian/wheelhouse.sha256;" \
             "run scripts/build_deb.sh --update-lock and commit the result" >&2
        exit 1
    fi
    if [ "$(sha256sum "$wheel" | cut -d' ' -f1)" != "$expected" ]; then
        echo "build_deb.sh: $name: sha256 differs from debian/wheelhouse.sha256" >&2
        exit 1
    fi
done

# The demo repository as it is served: the generated ONNX model, and the empty
# version folder an ensemble needs (git does not keep empty folders).
(cd "$src" && "$python" scripts/build_demo_repository.py model_repository)
for config in "$src"/model_repository/*/config.pbtxt; do
    model=$(dirname "$config")
    if grep -Eq 'platform:[[:space:]]*"ensemble"' "$config" \
        && ! ls -d "$model"/[1-9]* >/dev/null 2>&1; then
        mkdir "$model/1"
    fi
done

# -a: the host architecture of the package (nothing is compiled; the
# wheelhouse decides what runs where). -d: the build tools are this machine's
# own, not the host architecture's.
(cd "$src" && EDGEBOX_PYTHON_VERSION=$pyver dpkg-buildpackage -a"$arch" -d -us -uc -b)

mkdir -p "$out"
cp "$work"/edgebox_"$version"_"$arch".deb "$out"/
echo "built: $out/edgebox_${version}_$arch.deb"
