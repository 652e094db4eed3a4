#!/usr/bin/env bash
# Builds a Debian package of contend: the release binary (which carries the lock probe, the
# sharing runtime and the MPI wrapper's source), its manual pages, its shell completions and the
# JSON Schemas of its --json outputs.
# Install it with `sudo apt install ./contend_VERSION_ARCH.deb` on a machine without Rust.
#
#   scripts/package-deb.sh [OUTDIR]        (default: target/debian)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-target/debian}"
command -v dpkg-deb >/dev/null || { echo "package-deb: dpkg-deb is missing (Debian package dpkg)" >&2; exit 1; }
cargo build --release -q -p contend
exe=target/release/contend
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
arch=$(dpkg --print-architecture)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root="$stage/contend_${version}_$arch"
install -D -m 0755 "$exe" "$root/usr/bin/contend"
strip --strip-debug "$root/usr/bin/contend"
mkdir -p "$root/usr/share/man/man1"
"$exe" man --out-dir "$root/usr/share/man/man1" 2>/dev/null
gzip -9n "$root"/usr/share/man/man1/*.1
install -d "$root/usr/share/bash-completion/completions" "$root/usr/share/zsh/vendor-completions" \
  "$root/usr/share/fish/vendor_completions.d"
"$exe" completions bash >"$root/usr/share/bash-completion/completions/contend"
"$exe" completions zsh >"$root/usr/share/zsh/vendor-completions/_contend"
"$exe" completions fish >"$root/usr/share/fish/vendor_completions.d/contend.fish"
install -D -m 0644 README.md "$root/usr/share/doc/contend/README.md"
# The JSON Schema of every --json output, as `contend schema` prints them
"$exe" schema --out-dir "$root/usr/share/doc/contend/schema" 2>/dev/null
size=$(du -sk "$root" | cut -f1)
mkdir -p "$root/DEBIAN"
cat >"$root/DEBIAN/control" <<CONTROL
Package: contend
Version: $version
Architecture: $arch
Maintainer: contend developers <contend@localhost>
Installed-Size: $size
Depends: libc6
Recommends: gcc
Suggests: openmpi-bin, libopenmpi-dev, mpich, libmpich-dev, clang
Section: devel
Priority: optional
Description: generate, observe and explain contention in concurrent programs
 contend tells which shared resource a program that does not scale is
 contended on (locks, CPUs, memory, cache lines, MPI wait states), where in
 its code, and how much time it costs. It carries its lock probe and sharing
 runtime; record --mpi and cc need the MPI's mpicc and a C compiler.
CONTROL
mkdir -p "$out"
dpkg-deb --root-owner-group --build "$root" "$out/" >/dev/null
ls "$out"/contend_"${version}"_"$arch".deb
