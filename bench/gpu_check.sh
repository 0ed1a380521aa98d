#!/usr/bin/env bash
# The owed GPU checks in one call: tests on CUDA, CUDA graphs, the gpu_fast preset, the tutorial
# as written on cuda:0 and the CPU, Ray's gpu_share. Steps, goals and exit codes: bench/gpu_check.py.
#
#   bash bench/gpu_check.sh [--shared DIR] [--out DIR] [--plan | --dry-cpu] [--steps a,b] [...]
#
# Without CUDA it prints the plan and exits 0; --dry-cpu runs every step on the CPU, tiny.
# Output: --out, else $OUT (the device tool's folder), else gpu-check-<date>/ here: gpu-check.log
# (everything), summary.md, results.json, pytest.log and bench_graphs' recording (7 files).
#
# What the GPU machine lacks comes in .devtree/ (ignored; bench/gpu_pack.sh makes it; the device
# call carries it): site-cpXY.tar.xz (ray, babel, jsonschema: not in its image) unpacked to
# /tmp/cifarlab-site-cpXY and put on PYTHONPATH; shared/ (the CIFAR-10 archive and the tutorial
# as written), used when ../shared is absent, and linked there so that the tests find the
# archive where they always look. The machine's own python3 holds torch. See
# docs/gpu-results/README.md for the device call.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
PY=${PYTHON:-python3}
BUNDLE=${CIFARLAB_BUNDLE:-$ROOT/.devtree}
SHARED=${CIFARLAB_SHARED:-}
OUTDIR=${OUT:-}
pass=()
while [ $# -gt 0 ]; do
  case "$1" in
    --shared) SHARED=$2; shift 2 ;;
    --out) OUTDIR=$2; shift 2 ;;
    -h|--help) exec "$PY" bench/gpu_check.py --help ;;
    *) pass+=("$1"); shift ;;
  esac
done
[ -n "$OUTDIR" ] || OUTDIR="$ROOT/gpu-check-$(date -u +%Y-%m-%d-%H%M%S)"
mkdir -p "$OUTDIR" || exit 2
OUTDIR=$(cd "$OUTDIR" && pwd)
LOG=$OUTDIR/gpu-check.log
: > "$LOG"
say() { echo "gpu_check: $*" | tee -a "$LOG"; }

# packages the machine's image lacks, for this very Python (a bundle for another is left alone)
TAG=$("$PY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")') || {
  say "$PY does not run" >&2; exit 2; }
if [ -f "$BUNDLE/site-$TAG.tar.xz" ]; then
  SITE=/tmp/cifarlab-site-$TAG
  if [ ! -f "$SITE/.complete" ]; then
    # Python's own lzma: the image need not have the xz tool; the archive is ours (modes kept)
    rm -rf "$SITE" && mkdir -p "$SITE" && "$PY" -c 'import sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    t.extractall(sys.argv[2], **({"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}))' \
      "$BUNDLE/site-$TAG.tar.xz" "$SITE" \
      || { say "cannot unpack $BUNDLE/site-$TAG.tar.xz"; exit 2; }
    # compiled once here: Ray's raylet gives its dashboard agent seconds to start, and an agent
    # compiling its imports on first use can miss that window
    "$PY" -m compileall -q -j 0 "$SITE" >/dev/null 2>&1
    touch "$SITE/.complete"
  fi
  export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
  say "packages from $BUNDLE/site-$TAG.tar.xz on PYTHONPATH ($SITE)"
fi

# the data and the tutorial as written: --shared, $CIFARLAB_SHARED, ../shared, the bundle's copy
if [ -z "$SHARED" ]; then
  for cand in "$ROOT/../shared" "$BUNDLE/shared"; do
    if [ -f "$cand/data/cifar10-jpeg.tar.gz" ]; then SHARED=$cand; break; fi
  done
fi
if [ -n "$SHARED" ] && [ -d "$SHARED" ]; then
  SHARED=$(cd "$SHARED" && pwd)
  if [ ! -e "$ROOT/../shared" ]; then   # the tests read ../shared/data beside the checkout
    if ln -s "$SHARED" "$ROOT/../shared"; then
      say "linked $(cd "$ROOT/.." && pwd)/shared -> $SHARED"
    else
      say "could not link ../shared: the tests that read the archive will skip (and fail step 1)"
    fi
  fi
  export CIFARLAB_DATA=${CIFARLAB_DATA:-$SHARED/data/cifar10-jpeg.tar.gz}
  pass=(--shared "$SHARED" "${pass[@]}")
fi
export CIFARLAB_CACHE=${CIFARLAB_CACHE:-/tmp/cifarlab-cache}
export PYTHONUNBUFFERED=1

"$PY" bench/gpu_check.py --out "$OUTDIR" "${pass[@]}" 2>&1 | tee -a "$LOG"
rc=${PIPESTATUS[0]}
say "exit $rc; log and results in $OUTDIR"
exit "$rc"
