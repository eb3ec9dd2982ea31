#!/usr/bin/env bash
# Re-fetches the page's vendored libraries from the npm registry, at the pinned
# versions, with npm itself (it checks each tarball against the registry's
# integrity hash), and checks the files kept against SHA256SUMS:
#   marked     (MIT)                   markdown to HTML          -> marked.min.js
#   dompurify  (MPL-2.0 OR Apache-2.0) sanitizes that HTML       -> purify.min.js
# Run from anywhere; needs npm and network. To move to a new version, change
# it here, run with --update-sums, and look at the diff.
set -euo pipefail
cd "$(dirname "$0")"
MARKED=18.2.1
DOMPURIFY=3.4.18

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "marked@$MARKED" "dompurify@$DOMPURIFY" >/dev/null)
mkdir -p "$tmp/marked" "$tmp/dompurify"
tar -xzf "$tmp/marked-$MARKED.tgz" -C "$tmp/marked"
tar -xzf "$tmp/dompurify-$DOMPURIFY.tgz" -C "$tmp/dompurify"

# marked's UMD build is already minified (one line after its license banner).
cp "$tmp/marked/package/lib/marked.umd.js" marked.min.js
cp "$tmp/marked/package/LICENSE" marked.LICENSE.txt
cp "$tmp/dompurify/package/dist/purify.min.js" purify.min.js
cp "$tmp/dompurify/package/LICENSE" dompurify.LICENSE.txt
# The source maps are not kept: the page must not ask for files it lacks.
sed -i '/^\/\/# sourceMappingURL=/d' marked.min.js purify.min.js

if [ "${1:-}" = "--update-sums" ]; then
  sha256sum marked.min.js marked.LICENSE.txt purify.min.js dompurify.LICENSE.txt > SHA256SUMS
fi
sha256sum -c --quiet SHA256SUMS
echo "fetch.sh: marked $MARKED, dompurify $DOMPURIFY: ok"
