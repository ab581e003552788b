#!/bin/sh
# Rebuilds the golden key files from their hand-written hex listings and
# records their hashes with the reference xxHash tool (Debian package xxhash).
#
#   <name>.hex    the listing: hex bytes, '#' starts a comment (written by hand
#                 from the format in primcache/keyhash/key.hpp, never dumped
#                 from the code under test)
#   <name>.bin    the bytes (xxd -r -p of the listing without comments)
#   xxh3_64.txt   `xxhsum -H3` of every .bin: XXH3-64, big-endian hex
#   xxh3_128.txt  `xxhsum -H2` of every .bin: XXH3-128, high half first
#
# Check the committed files without rewriting them:
#   cd tests/keyhash/golden && xxhsum -c xxh3_64.txt && xxhsum -c xxh3_128.txt
set -eu
cd "$(dirname "$0")"
for listing in *.hex; do
  name=${listing%.hex}
  sed 's/#.*//' "$listing" | xxd -r -p > "$name.bin"
done
xxhsum -H3 *.bin > xxh3_64.txt
xxhsum -H2 *.bin > xxh3_128.txt
