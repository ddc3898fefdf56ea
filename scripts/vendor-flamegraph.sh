#!/usr/bin/env bash
# The flame graph's JavaScript in the HTML page (analyzer/src/spinscope/output/vendor/): re-fetch each package
# of vendor/manifest.txt from npm (`npm pack NAME@VERSION`, the registry's tarball) and check that the vendored
# file and licence are its bytes (vendor/SHA256SUMS). With --update, write them and their sums instead (after
# changing a version in the manifest). Needs npm and the registry; building a page never does.
set -euo pipefail
cd "$(dirname "$0")/../analyzer/src/spinscope/output/vendor"

update=0
[[ "${1:-}" == --update ]] && update=1
command -v npm >/dev/null || { echo "vendor-flamegraph: npm not found (apt-get install npm)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

while read -r name version path; do
    [[ -z "$name" || "$name" == \#* ]] && continue
    tarball=$(cd "$work" && timeout 120 npm pack --silent "$name@$version")
    mkdir -p "$work/$name"
    tar -xzf "$work/$tarball" -C "$work/$name"
    if ((update)); then
        cp "$work/$name/package/$path" "$name.min.js"
        cp "$work/$name/package/LICENSE" "$name.LICENSE"
    else
        cmp -s "$work/$name/package/$path" "$name.min.js" || { echo "vendor-flamegraph: $name.min.js is not $name@$version's $path" >&2; exit 1; }
        cmp -s "$work/$name/package/LICENSE" "$name.LICENSE" || { echo "vendor-flamegraph: $name.LICENSE is not $name@$version's LICENSE" >&2; exit 1; }
    fi
done < manifest.txt

if ((update)); then
    sha256sum ./*.min.js ./*.LICENSE | sed 's| \./| |' > SHA256SUMS
    echo "vendor-flamegraph: updated $(wc -l < SHA256SUMS) files and SHA256SUMS"
else
    sha256sum --quiet -c SHA256SUMS
    echo "vendor-flamegraph: every file is its package's, as SHA256SUMS says"
fi
