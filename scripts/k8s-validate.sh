#!/usr/bin/env bash
# Kubernetes' own schemas for `headroom k8s manifest`'s objects: installs the kubernetes-validate
# package from PyPI (it bundles the OpenAPI-derived JSON schemas of every Kubernetes release,
# so validating is offline) into a private virtualenv, once, and prints the path of its
# `kubernetes-validate` executable. crates/headroom/tests/k8s_schema.rs runs it.
#
#   HEADROOM_K8S_VENV  where the virtualenv lives (default /tmp/headroom-k8s-validate)
#
# Debian's python3 needs python3-venv for `python3 -m venv`; it is installed when missing.
set -euo pipefail
VERSION=1.37.0
VENV=${HEADROOM_K8S_VENV:-/tmp/headroom-k8s-validate}
BIN="$VENV/bin/kubernetes-validate"
die() { echo "scripts/k8s-validate.sh: $*" >&2; exit 1; }

if [ -x "$BIN" ] && [ "$("$VENV/bin/pip" show kubernetes-validate 2>/dev/null | sed -n 's/^Version: //p')" = "$VERSION" ]; then
  echo "$BIN"
  exit 0
fi
command -v python3 >/dev/null || die "needs python3 (apt-get install python3)"
if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-venv >/dev/null
fi
rm -rf "$VENV"
python3 -m venv "$VENV" || die "python3 -m venv $VENV failed"
"$VENV/bin/pip" install -q "kubernetes-validate==$VERSION" >&2 ||
  die "pip install kubernetes-validate==$VERSION failed (PyPI reachable?)"
[ -x "$BIN" ] || die "no $BIN after installing"
echo "$BIN"
