#!/usr/bin/env bash
# Installs libsmt: the shared and static library, the header and a
# pkg-config file made from smt.pc.in for the prefix.
#
#   crates/smt-c/install.sh [--prefix DIR] [--libdir DIR] [--from DIR]
#
# --prefix   where to install (default /usr/local): DIR/include/smt.h
# --libdir   where the libraries and pkgconfig/smt.pc go (default PREFIX/lib)
# --from     a directory already holding libsmt.so and libsmt.a (default:
#            build them with `cargo build --release -p smt-c` and take
#            them from the target directory)
#
# Then: cc prog.c $(pkg-config --cflags --libs smt)
# (with PKG_CONFIG_PATH=LIBDIR/pkgconfig if LIBDIR is not searched), or
# statically: cc prog.c $(pkg-config --cflags smt) LIBDIR/libsmt.a \
#             $(pkg-config --static --libs-only-l smt | sed 's/-lsmt //')
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
prefix=/usr/local
libdir=
from=
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix="$2"; shift 2 ;;
        --libdir) libdir="$2"; shift 2 ;;
        --from) from="$2"; shift 2 ;;
        *) echo "install.sh: unknown option $1 (see the comment at the top)" >&2; exit 2 ;;
    esac
done
libdir="${libdir:-$prefix/lib}"

if [ -z "$from" ]; then
    (cd "$root" && cargo build --release -p smt-c)
    from="${CARGO_TARGET_DIR:-$root/target}/release"
fi
for lib in libsmt.so libsmt.a; do
    [ -f "$from/$lib" ] || { echo "install.sh: no $lib in $from" >&2; exit 1; }
done

version="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$root/Cargo.toml")"
mkdir -p "$prefix/include" "$libdir/pkgconfig"
install -m 0644 "$here/include/smt.h" "$prefix/include/smt.h"
# The real file carries the full version; libsmt.so.ABI (the SONAME a
# release build records, see build.rs) and libsmt.so (for -lsmt) link to it.
major="${version%%.*}"
minor="${version#*.}"; minor="${minor%%.*}"
if [ "$major" = 0 ]; then abi="0.$minor"; else abi="$major"; fi
install -m 0755 "$from/libsmt.so" "$libdir/libsmt.so.$version"
ln -sfn "libsmt.so.$version" "$libdir/libsmt.so.$abi"
ln -sfn "libsmt.so.$abi" "$libdir/libsmt.so"
install -m 0644 "$from/libsmt.a" "$libdir/libsmt.a"
sed -e "s|@PREFIX@|$prefix|" -e "s|@LIBDIR@|$libdir|" -e "s|@VERSION@|$version|" \
    "$here/smt.pc.in" > "$libdir/pkgconfig/smt.pc"
echo "installed libsmt $version: $prefix/include/smt.h, $libdir/libsmt.so.$version (+ libsmt.so.$abi, libsmt.so), $libdir/libsmt.a, $libdir/pkgconfig/smt.pc"
