#!/usr/bin/env bash
# Builds the edgebox .deb (Architecture: all) from a clean copy of the repository.
#
#   scripts/build_deb.sh [--ref REF] [--out DIR]
#
# Copies the repository into a temporary folder (by default the files git
# would commit: tracked and untracked-but-not-ignored, as they are in the
# working tree; with --ref, exactly the committed tree REF), generates the demo
# model repository's ONNX file there, runs `dpkg-buildpackage -us -uc -b`, and
# puts the .deb in DIR (default: dist/). Nothing in the working tree changes.
#
# Needs, on Debian 12 or Ubuntu 22.04 (any architecture: the package is "all"):
#   sudo apt-get install dpkg-dev debhelper python3 python3-pip python3-setuptools python3-wheel
# and a Python with `onnx` and `numpy` for the demo model, taken from $PYTHON,
# else .venv/bin/python (`make demo-models` sets that up), else python3.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
ref=""
out="$root/dist"
while [ $# -gt 0 ]; do
    case "$1" in
        --ref) ref=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) echo "build_deb.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

for tool in dpkg-buildpackage dh git; do
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

(cd "$src" && dpkg-buildpackage -us -uc -b)

mkdir -p "$out"
cp "$work"/edgebox_"$version"_*.deb "$out"/
echo "built: $(ls "$out"/edgebox_"$version"_*.deb)"
