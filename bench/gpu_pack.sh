#!/usr/bin/env bash
# Packs what bench/gpu_check.sh needs on the GPU machine and its image lacks into .devtree/ (git
# ignores it; the device call carries it). Run here, where pip reaches the package index; it
# costs no device time. See docs/gpu-results/README.md.
#
#   bash bench/gpu_pack.sh [--python-version 3.12] [--shared ../shared] [--dest .devtree]
#
# .devtree/site-cp312.tar.xz  ray (requirements-ray.txt's pin, less its Java jars, dashboard
#                             web client and the rllib/data/serve/tune/train/llm libraries, none
#                             of which the Ray executor imports: 79 MB of wheel is more than a
#                             device call carries), babel (requirements.txt's pin; CLDR data for
#                             en, es and pt only), SQLAlchemy (the run store, which the Ray bench
#                             writes) and plotly (the GPU engine's figures, which test_graphs
#                             draws), and the jsonschema that ray imports, built for the GPU
#                             machine's Python 3.12: about 30 MB
# .devtree/shared/data/cifar10-jpeg.tar.gz, .devtree/shared/reference/tutorial_offline.py
#                             copies (a link would travel as a link, its target left behind)
#
# --python-version 3.11 builds a bundle for this machine's Python instead, to try it here.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYVER=3.12
SHARED=$ROOT/../shared
DEST=$ROOT/.devtree
PIP=${PIP:-python3 -m pip}
while [ $# -gt 0 ]; do
  case "$1" in
    --python-version) PYVER=$2; shift 2 ;;
    --shared) SHARED=$2; shift 2 ;;
    --dest) DEST=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
TAG=cp${PYVER/./}
pin() { grep -E "^$1==" "$2" | head -1 | sed -E 's/[[:space:]]*#.*//'; }
# ray's needs that the GPU machine's image lacks (KINDS.md lists what it has), at the versions
# tested with ray 2.60.0 here
EXTRA="jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1"
WANT="$(pin ray "$ROOT/requirements-ray.txt") $(pin babel "$ROOT/requirements.txt")
  $(pin SQLAlchemy "$ROOT/requirements.txt") $(pin plotly "$ROOT/requirements.txt") $EXTRA"
WHEELS=/tmp/cifarlab-wheels-$TAG
SITE=$(mktemp -d /tmp/cifarlab-pack-XXXXXX)
trap 'rm -rf "$SITE"' EXIT
mkdir -p "$WHEELS" "$DEST"

echo "gpu_pack: downloading $WANT for Python $PYVER (x86_64 manylinux) into $WHEELS"
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 \
         manylinux1_x86_64; do platforms+=(--platform "$p"); done
# shellcheck disable=SC2086
$PIP download -q --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
  "${platforms[@]}" -d "$WHEELS" $WANT
files=()
for spec in $WANT; do
  name=${spec%%==*}; ver=${spec##*==}; stem=${name//-/_}
  f=$(ls "$WHEELS"/"$stem"-"$ver"-*.whl 2>/dev/null | head -1 || true)
  [ -n "$f" ] || f=$(ls "$WHEELS"/"${stem,,}"-"$ver"-*.whl 2>/dev/null | head -1 || true)
  [ -n "$f" ] || { echo "gpu_pack: no wheel for $spec in $WHEELS" >&2; exit 1; }
  files+=("$f")
done
# shellcheck disable=SC2086
$PIP install -q --no-index --no-deps --no-compile --only-binary=:all: --python-version "$PYVER" \
  --implementation cp "${platforms[@]}" --target "$SITE" "${files[@]}"
rm -rf "$SITE"/bin "$SITE"/ray/jars "$SITE"/ray/dashboard/client/build "$SITE"/ray/rllib \
  "$SITE"/ray/data "$SITE"/ray/serve "$SITE"/ray/tune "$SITE"/ray/train "$SITE"/ray/llm
# CLDR data for the catalogs' languages (en, es, pt) and their parent, root: 1.6 of babel's 32 MB
find "$SITE/babel/locale-data" -name '*.dat' ! -name 'root.dat' ! -name 'en*.dat' \
  ! -name 'es*.dat' ! -name 'pt*.dat' -delete
echo "gpu_pack: packing $(du -sh "$SITE" | cut -f1) into $DEST/site-$TAG.tar.xz (xz takes minutes)"
tar -C "$SITE" -cf - . | xz -9 -T0 > "$DEST/site-$TAG.tar.xz.part"
mv "$DEST/site-$TAG.tar.xz.part" "$DEST/site-$TAG.tar.xz"

mkdir -p "$DEST/shared/data" "$DEST/shared/reference"
cp -f "$SHARED/data/cifar10-jpeg.tar.gz" "$DEST/shared/data/"
cp -f "$SHARED/reference/tutorial_offline.py" "$DEST/shared/reference/"

# what a device call sends: tracked + untracked-not-ignored files, and .devtree (limit 64 MiB)
tree=$(cd "$ROOT" && git ls-files -co --exclude-standard -z | xargs -0 stat -c %s 2>/dev/null \
       | awk '{s+=$1} END {print s+0}')
bundle=$(du -sb "$DEST" | cut -f1)
total=$((tree + bundle))
awk -v t="$tree" -v b="$bundle" -v d="$DEST" 'BEGIN { m = 1048576; printf "gpu_pack: working \
tree %.1f MiB + %s %.1f MiB = %.1f MiB of the 64 MiB a call carries\n", t / m, d, b / m, (t + b) / m }'
ls -la "$DEST" "$DEST/shared/data" "$DEST/shared/reference"
if [ "$total" -gt $((62 * 1048576)) ]; then
  echo "gpu_pack: too close to the 64 MiB limit: remove other untracked files first" >&2
  exit 1
fi
